"""A worker process for test_process.py: Worker.serve with a handler that
streams text until the reply is stopped. Prints "ready" once it claims."""

from __future__ import annotations

import asyncio
import os
import sys

from convo_worker import Job, Settings, Worker


async def handle(job: Job) -> None:
    n = 0
    while True:
        job.reply.text(f"<{n}>")
        n += 1
        await asyncio.sleep(0.05)


async def main() -> None:
    settings = Settings(
        worker_id=os.environ["CONVO_WORKER_ID"],
        lease_seconds=int(os.environ["CONVO_LEASE_SECONDS"]),
        drain_timeout=float(os.environ["CONVO_DRAIN_TIMEOUT"]),
    )
    worker = Worker(os.environ["DATABASE_URL"], handle, settings)
    await worker.start()
    print("ready", flush=True)
    await worker.serve()


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
