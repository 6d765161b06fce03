"""The process lease (``convo.worker_heartbeat``; docs/worker-api.md, "Two
leases"), as the Go runtime keeps it.

One heartbeat per Worker, every third of the lease, from its own task and
on a connection of its own, keeps every prompt the worker claimed alive,
however many run and however long the lanes' batches wait. No heartbeat
rides in a batch.

The worker claims only while its lease is live by its own clock: until
the send time of the last heartbeat that extended it, plus the lease
(PostgreSQL's end of the lease is later: it counts from when the call
arrived). When that time passes with no heartbeat through (PostgreSQL
unreachable, the calls timing out), every reply in flight stops, writing
nothing more: PostgreSQL fails them (or hands them back to the queue) once
the lease ran out there too. The next heartbeat that gets through then
starts a new lease and lets go, at once, of whatever the old one held
(``starting``), so that no prompt this process dropped stays held by it. A
heartbeat that answers false (the lease had run out in PostgreSQL) stops
every reply in flight too.

After each heartbeat through, one read asks which of the prompts in flight
are no longer the worker's (cancelled with the notification missed, failed
or handed back by someone else): those stop. A slow read never holds up
the next heartbeat.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from ._db import Pool, log, message_of
from .settings import Settings

#: The reason of the replies stopped because the process lease ran out.
LEASE_LOST = "the worker's process lease ran out (no heartbeat got through in time)"

# The first wait before a failed heartbeat is tried again; it doubles up
# to the heartbeat interval.
_RETRY = 0.1

_HEARTBEAT_SQL = "SELECT convo.worker_heartbeat(%s, %s, %s)"


class ProcessLease:
    """Keeps the worker's process lease until stopped.

    ``lost`` stops every reply in flight; ``taken`` wakes the claim loop
    (it waits for a live lease); ``check`` reads which prompts in flight
    are no longer the worker's and stops them (on the worker's pool)."""

    def __init__(self, pool: Pool, settings: Settings, *, lost: Callable[[], None], taken: Callable[[], None],
                 check: Callable[[], Awaitable[None]]) -> None:
        # A pool of one connection of its own: a heartbeat never waits for a
        # connection behind claims or reads, nor for a batch.
        self._pool = pool
        self._s = settings
        self._lost_hook = lost
        self._taken_hook = taken
        self._check_hook = check
        self._until = 0.0  # the lease's end by this process's clock (loop.time())
        self._lost = False
        # Grows each time the lease is lost: a claim made under an older
        # epoch does not run.
        self._epoch = 0
        self._task: asyncio.Task[None] | None = None
        self._check_task: asyncio.Task[None] | None = None
        self._watchdog: asyncio.TimerHandle | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="convo-worker heartbeat")

    async def stop(self) -> None:
        """Stops heartbeating (the lease runs out in PostgreSQL on its own)
        and closes the lease's connection."""
        if self._watchdog is not None:
            self._watchdog.cancel()
        for task in (self._task, self._check_task):
            if task is not None and not task.done():
                task.cancel()
                await asyncio.wait([task])
        await self._pool.close()

    def live(self) -> tuple[int, bool]:
        """The lease's epoch, and whether it is live by this process's
        clock."""
        return self._epoch, not self._lost and asyncio.get_running_loop().time() < self._until

    def held(self, epoch: int) -> bool:
        """Whether the lease of epoch is still live: a claim made under it
        may run its prompts."""
        e, live = self.live()
        return live and e == epoch

    async def _run(self) -> None:
        s = self._s
        loop = asyncio.get_running_loop()
        retry = _RETRY
        starting = True
        while True:
            sent = loop.time()
            wait = s.heartbeat_interval
            try:
                rows = await self._pool.fetch(_HEARTBEAT_SQL, (s.worker_id, s.lease_seconds, starting))
            except Exception as err:
                wait, retry = retry, min(2 * retry, max(_RETRY, s.heartbeat_interval))
                log.warning("worker %s: heartbeat failed, retrying in %.2fs: %s", s.worker_id, wait, message_of(err))
            else:
                retry = _RETRY
                live = bool(rows[0][0])
                if not live and not starting:
                    log.warning("worker %s: the process lease had run out: its replies in flight are stopped",
                                s.worker_id)
                    self._lose()
                elif not starting:
                    self._check()
                self._taken(sent + s.lease_seconds)
                starting = False
            await asyncio.sleep(wait)
            # Once the lease lapsed here, the next heartbeat lets go of what
            # the old one held: this process stopped those replies.
            if self._lost:
                starting = True

    def _taken(self, until: float) -> None:
        """A heartbeat got through: the lease lasts until ``until`` by this
        process's clock."""
        loop = asyncio.get_running_loop()
        self._until = until
        self._lost = False
        if self._watchdog is not None:
            self._watchdog.cancel()
        self._watchdog = loop.call_later(max(0.0, until - loop.time()), self._lapsed)
        self._taken_hook()

    def _lapsed(self) -> None:
        """The lease's end passed: unless a heartbeat extended it meanwhile,
        every reply in flight stops."""
        if self._lost:
            return
        loop = asyncio.get_running_loop()
        left = self._until - loop.time()
        if left > 0:
            # asyncio runs a timer up to its clock's resolution early: wait
            # out the rest, or the lease would never be seen to lapse. (A
            # heartbeat that extended the lease cancelled this timer and
            # set its own.)
            self._watchdog = loop.call_later(left, self._lapsed)
            return
        log.warning("worker %s: the process lease ran out (%ds): no heartbeat got through; its replies in flight "
                    "are stopped", self._s.worker_id, self._s.lease_seconds)
        self._lost = True
        self._lose()

    def _lose(self) -> None:
        """Stops every reply in flight, and those of claims under way (a new
        epoch)."""
        self._epoch += 1
        self._lost_hook()

    def check_now(self) -> None:
        """Checks the prompts in flight now (as after a heartbeat), unless a
        check is under way: the listener does after it listens again, for
        the cancels it may have missed while away."""
        self._check()

    def _check(self) -> None:
        if self._check_task is not None and not self._check_task.done():
            return
        self._check_task = asyncio.create_task(self._checked(), name="convo-worker check")

    async def _checked(self) -> None:
        try:
            await self._check_hook()
        except Exception as err:
            log.warning("worker %s: check the prompts in flight: %s", self._s.worker_id, message_of(err))
