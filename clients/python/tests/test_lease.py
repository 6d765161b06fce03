"""The process lease against real PostgreSQL: one heartbeat per process
keeps every reply it runs, whatever its batches do; a process whose
heartbeats stop getting through loses them all; a prompt ended elsewhere
stops its reply at the next heartbeat's check."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest

from conftest import Client, eventually
from convo_worker import Job
from convo_worker import _batch, _db
from helpers import running


def ticking(ticks: int, pause: float):
    async def handler(job: Job) -> None:
        for i in range(ticks):
            job.reply.text(f"tick{i} ")
            await asyncio.sleep(pause)
    return handler


async def hanging(job: Job) -> None:
    """One word, then nothing a refused write could answer."""
    job.reply.text("hanging")
    await asyncio.Event().wait()


@pytest.fixture
async def reaper(dsn: str) -> AsyncIterator[None]:
    """Calls convo.expire_leases every 100 ms, as the server's maintenance
    does."""
    async def loop() -> None:
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            while True:
                await conn.execute("SELECT convo.expire_leases()")
                await asyncio.sleep(0.1)

    task = asyncio.create_task(loop())
    try:
        yield
    finally:
        task.cancel()
        await asyncio.wait([task])


async def test_one_heartbeat_per_process_not_per_prompt(dsn: str, client: Client,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    fetch = _db.Pool.fetch

    async def counting_fetch(self: _db.Pool, sql: str, params: Any) -> list[tuple[Any, ...]]:
        calls.append(sql)
        return await fetch(self, sql, params)

    batch_beats = 0
    write = _batch.Lane._write

    async def counting_write(self: _batch.Lane, wire: list[dict[str, Any]]) -> Any:
        nonlocal batch_beats
        batch_beats += sum(1 for o in wire if o["op"] == "heartbeat")
        return await write(self, wire)

    monkeypatch.setattr(_db.Pool, "fetch", counting_fetch)
    monkeypatch.setattr(_batch.Lane, "_write", counting_write)
    loop = asyncio.get_running_loop()
    start = loop.time()
    # A lease of 2 s: a heartbeat every 0.67 s.
    async with running(dsn, ticking(60, 0.05), slots=8, lease_seconds=2) as (_, recorder):
        prompts = [await client.send(f"in parallel {i}") for i in range(8)]
        for p in prompts:
            assert (await client.settled(p))["status"] == "completed"
        await eventually("every result", lambda: asyncio.sleep(0, len(recorder.results) == 8))
        elapsed = loop.time() - start
    beats = sum(1 for sql in calls if "convo.worker_heartbeat(" in sql)
    # One per interval for the process (a loaded machine may beat less
    # often), not one per prompt and interval.
    per_interval = beats / (elapsed / (2 / 3))
    assert beats >= 3 and per_interval <= 1.5, f"{beats} process heartbeats in {elapsed:.1f}s with 8 replies"
    assert not [sql for sql in calls if "convo.heartbeat(" in sql]
    assert batch_beats == 0
    assert {r.outcome for r in recorder.results.values()} == {"completed"}


async def test_batches_slower_than_the_lease_lose_no_reply(dsn: str, client: Client, reaper: None,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch takes 2.5 s, with a lease of 2 s: a lease that rode in
    the batches would run out between any two of them."""
    write = _batch.Lane._write

    async def slow_write(self: _batch.Lane, wire: list[dict[str, Any]]) -> Any:
        await asyncio.sleep(2.5)
        return await write(self, wire)

    monkeypatch.setattr(_batch.Lane, "_write", slow_write)
    async with running(dsn, ticking(60, 0.02), slots=6, lease_seconds=2) as (_, recorder):
        prompts = [await client.send(f"slowly {i}") for i in range(4)]
        for p in prompts:
            settled = await client.settled(p, timeout=60)
            assert settled == {"status": "completed", "error": None, "worker": "pytest-worker"}
            assert (await client.blocks(p))[0]["content"] == "".join(f"tick{i} " for i in range(60))
        await eventually("every result", lambda: asyncio.sleep(0, len(recorder.results) == 4), timeout=30)
    assert {r.outcome for r in recorder.results.values()} == {"completed"}


async def test_failing_heartbeats_stop_the_replies_and_serving_resumes(dsn: str, client: Client) -> None:
    async def handler(job: Job) -> None:
        if job.last_user_text == "again":
            job.reply.text("served")
            return
        await ticking(100_000, 0.02)(job)

    loop = asyncio.get_running_loop()
    async with running(dsn, handler, worker_id="cut-off", slots=2, lease_seconds=2) as (worker, recorder):
        lease_pool = worker._lease._pool  # type: ignore[union-attr]
        fetch = lease_pool.fetch
        beats_fail = False

        async def failing_fetch(sql: str, params: Any) -> list[tuple[Any, ...]]:
            if beats_fail:
                raise OSError("connection terminated unexpectedly")
            return await fetch(sql, params)

        lease_pool.fetch = failing_fetch  # type: ignore[method-assign]
        prompt = await client.send("long")
        await eventually("text to stream", lambda: client.streamed_text(prompt))
        # Its batches still go through; its heartbeats do not.
        beats_fail = True
        cut = loop.time()
        result = await eventually("the reply to stop", lambda: asyncio.sleep(0, recorder.results.get(prompt)), 10)
        # The lease, and a second for a loaded machine.
        assert loop.time() - cut <= 3.0
        assert result.outcome == "stopped"
        assert "process lease ran out" in (result.error or "")
        # It wrote nothing more.
        text = await client.streamed_text(prompt)
        await asyncio.sleep(0.3)
        assert await client.streamed_text(prompt) == text

        # PostgreSQL fails it once the lease ran out there too.
        async def reaped() -> dict[str, Any] | None:
            await client.one("SELECT convo.expire_leases()")
            p = await client.prompt(prompt)
            return p if p["status"] == "failed" else None

        failed = await eventually("the reply to fail", reaped)
        assert failed["error"] == "lease expired: worker cut-off stopped heartbeating"
        # Heartbeats through again: a new lease, and new replies run.
        beats_fail = False
        again = await client.send("again")
        assert await client.settled(again) == {"status": "completed", "error": None, "worker": "cut-off"}


async def test_a_prompt_failed_elsewhere_stops_its_idle_reply(dsn: str, client: Client) -> None:
    loop = asyncio.get_running_loop()
    async with running(dsn, hanging, slots=1, lease_seconds=2) as (_, recorder):
        prompt = await client.send("hang")
        await eventually("text to stream", lambda: client.streamed_text(prompt))
        await client.one("SELECT convo.fail_prompt(%s, 'stopped by an operator')", prompt)
        ended = loop.time()
        result = await eventually("the reply to stop", lambda: asyncio.sleep(0, recorder.results.get(prompt)), 5)
        # Within a heartbeat interval (0.67 s), and a second for a loaded machine.
        assert loop.time() - ended <= 1.7
    assert result.outcome == "stopped"
    assert "no longer this worker's (failed)" in (result.error or "")
    assert (await client.prompt(prompt))["error"] == "stopped by an operator"


async def test_a_prompt_cancelled_with_the_notification_missed_stops_as_cancelled(dsn: str, client: Client) -> None:
    async with running(dsn, hanging, slots=1, lease_seconds=2) as (_, recorder):
        prompt = await client.send("hang")
        await eventually("text to stream", lambda: client.streamed_text(prompt))
        # Cancelled as convo.cancel_prompt would, with no notification heard.
        await client.one("UPDATE convo.prompts SET status = 'cancelled' WHERE id = %s RETURNING id", prompt)
        result = await eventually("the reply to stop", lambda: asyncio.sleep(0, recorder.results.get(prompt)), 5)
    assert result.outcome == "cancelled"
