"""A worker as a process: SIGTERM drains it, SIGKILL leaves its prompt to
lease expiry."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from conftest import Client, eventually

HERE = Path(__file__).resolve().parent


@asynccontextmanager
async def worker_process(dsn: str, name: str, lease: int, drain: float) -> AsyncIterator[asyncio.subprocess.Process]:
    env = {**os.environ, "DATABASE_URL": dsn, "CONVO_WORKER_ID": name,
           "CONVO_LEASE_SECONDS": str(lease), "CONVO_DRAIN_TIMEOUT": str(drain)}
    if os.environ.get("CONVO_TEST_INSTALLED") != "1":
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE.parent / "src"), env.get("PYTHONPATH")]))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(HERE / "serve_worker.py"), env=env, stdout=asyncio.subprocess.PIPE)
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line == b"ready\n", f"the worker process printed {line!r}, not ready"
        yield proc
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_sigterm_drains_then_fails_what_still_runs(dsn: str, client: Client) -> None:
    async with worker_process(dsn, "proc-term", lease=30, drain=1.0) as proc:
        prompt = await client.send("stream")
        await eventually("text to stream", lambda: client.streamed_text(prompt))
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.wait_for(proc.wait(), 15)

    assert code == 0
    settled = await client.prompt(prompt)
    assert settled["status"] == "failed"
    assert settled["error"] == "worker proc-term stopped before the reply finished (shutting down)"
    assert (await client.blocks(prompt))[0]["content"].startswith("<0><1>")


async def test_sigkill_loses_the_lease(dsn: str, client: Client) -> None:
    async with worker_process(dsn, "proc-kill", lease=2, drain=1.0) as proc:
        prompt = await client.send("stream")
        await eventually("text to stream", lambda: client.streamed_text(prompt))
        proc.kill()
        await proc.wait()

    assert (await client.prompt(prompt))["status"] == "running"

    async def reaped() -> bool:
        await client.one("SELECT convo.expire_leases()")
        return (await client.prompt(prompt))["status"] == "failed"

    await eventually("the lease to expire", reaped)
    settled = await client.prompt(prompt)
    assert settled["error"] == "lease expired: worker proc-kill stopped heartbeating"
    assert (await client.blocks(prompt))[0]["content"].startswith("<0>")
