"""What the worker tests share: a worker started and stopped around a
test, and handlers that signal where they are."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from convo_worker import Handler, Result, Settings, Worker


@dataclass
class Recorder:
    """Collects the Results a worker reports."""

    results: dict[str, Result] = field(default_factory=dict)

    def __call__(self, result: Result) -> None:
        self.results[result.prompt_id] = result


@asynccontextmanager
async def running(dsn: str, handler: Handler, **settings: object) -> AsyncIterator[tuple[Worker, Recorder]]:
    """A started worker (fast batches, short lease unless given), stopped
    at the end."""
    opts: dict[str, object] = {"worker_id": "pytest-worker", "slots": 4, "lease_seconds": 30, "poll_interval": 1.0}
    opts.update(settings)
    recorder = Recorder()
    worker = Worker(dsn, handler, Settings(**opts), on_prompt_done=recorder)  # type: ignore[arg-type]
    await worker.start()
    try:
        yield worker, recorder
    finally:
        await asyncio.wait_for(worker.stop(), 30)
