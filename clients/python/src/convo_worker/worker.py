"""The Worker: claims prompts, runs the handler on each, settles them."""

from __future__ import annotations

import asyncio
import hashlib
import random
import signal
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import psycopg

from ._batch import Lane, Op, PromptWriter
from ._db import ILLEGAL_STATE, NOT_FOUND, Pool, close_quietly, connect, log, message_of, with_retries
from ._lease import LEASE_LOST, ProcessLease
from .errors import PromptStopped, WriteRefused
from .job import ContextBlock, ContextFiles, Job, PromptFile
from .pause import InputRequest
from .reply import Reply, ToolCall
from .settings import Settings

Handler = Callable[[Job], Awaitable[None]]
Outcome = Literal["completed", "failed", "cancelled", "stopped", "waiting"]

#: The channel the SQL worker API notifies with ``queued:<prompt id>``,
#: ``queued:*`` (one notification for every prompt a transaction queued)
#: and ``cancelled:<prompt id>``.
PROMPTS_CHANNEL = "convo_prompts"

# Claims per call of claim_prompts, at most.
_CLAIM_BATCH = 100

# A LISTEN connection silent this long is pinged, and made again when the
# ping goes unanswered for _LISTEN_PING_TIMEOUT (as the Go runtime's
# listener): one gone silent without a reset (a network that drops
# packets, a middlebox that forgot the flow) would otherwise leave the
# worker deaf to cancels and new prompts until TCP gives up.
_LISTEN_PING_INTERVAL = 30.0
_LISTEN_PING_TIMEOUT = 5.0

# resumed: the prompt has input requests (it paused for input before, and
# an answer queued it again). trace_context: the W3C trace context the
# request that sent the prompt's message left (convo.prompt_trace), for
# the handler to continue (Job.traceparent).
_CLAIM_SQL = """
SELECT c.prompt_id::text, c.conversation_id::text, c.message_id::text, c.model_config, c.attempts,
       EXISTS (SELECT 1 FROM convo.prompt_inputs(c.prompt_id, %s)) AS resumed, t.trace_context
  FROM convo.claim_prompts(%s, %s, %s, %s) c
 CROSS JOIN LATERAL convo.prompt_trace(c.prompt_id, %s) t
"""
_CONTEXT_SQL = """
SELECT message_id::text, role, block_type, content, metadata, tool_call_id::text, tool_name,
       tool_input, tool_status, tool_output, tool_error, message_position
  FROM convo.worker_context(%s, %s)
 ORDER BY message_position, block_position
"""
_REPLY_SQL = """
SELECT message_id::text, role, block_type, content, metadata, tool_call_id::text, tool_name,
       tool_input, tool_status, tool_output, tool_error, message_position
  FROM convo.worker_reply(%s, %s)
 ORDER BY block_position
"""
_FILES_SQL = """
SELECT message_id::text, message_position, file_id::text, filename, media_type, size, sha256, storage,
       blob_id::text, chunks
  FROM convo.prompt_files(%s, %s)
 ORDER BY message_position, file_position
"""
_CHUNK_SQL = "SELECT convo.file_chunk(%s, %s, %s, %s)"
# Of the prompts in flight, those no longer the worker's to write (ended,
# or held by another worker or by none: status ''): one read per heartbeat
# for the whole process, which a heartbeat per prompt told a worker.
_GONE_SQL = """
SELECT g.prompt_id::text, g.status
  FROM (SELECT u.id AS prompt_id, coalesce(convo.prompt_status(u.id, %s), '') AS status
          FROM unnest(%s::uuid[]) AS u(id)) g
 WHERE g.status NOT IN ('queued', 'running')
"""
_INPUTS_SQL = """
SELECT tool_call_id::text, name, input, tool_call_status, kind, request, status, answer, answered_at, expires_at
  FROM convo.prompt_inputs(%s, %s)
"""


@dataclass(frozen=True)
class Result:
    """How a prompt this worker ran ended (``on_prompt_done``).

    ``outcome``: ``completed``; ``failed`` (the handler raised, a write was
    refused, or the worker stopped it while shutting down: ``error`` says
    why); ``cancelled`` (by the user: nothing more was written); ``stopped``
    (no longer this worker's, or released unstarted); ``waiting`` (a tool
    call asked for input and the prompt was parked: an answer queues it
    again, for any worker)."""

    prompt_id: str
    outcome: Outcome
    error: str | None
    duration: float
    deltas: int


class Worker:
    """Runs ``handler`` on the prompts it claims, up to ``settings.slots``
    at once, over a few connections whatever the number of slots: one per
    lane (the batches), ``settings.db_connections`` for claims and reads,
    one for the process lease's heartbeat (which keeps every prompt the
    worker holds alive; docs/worker-api.md, "Two leases") and one that
    listens on ``convo_prompts``.

    A handler that returns completes the prompt; one that raises fails it
    with the exception's text (what it wrote stays); one stopped (see Job)
    writes nothing more. ``start`` then ``wait``, or ``run``, or ``serve``
    (which drains on SIGTERM and SIGINT); ``drain`` and ``stop`` end it."""

    def __init__(
        self,
        conninfo: str,
        handler: Handler,
        settings: Settings | None = None,
        *,
        on_prompt_done: Callable[[Result], None] | None = None,
    ) -> None:
        if not isinstance(conninfo, str) or not conninfo:
            raise ValueError("Worker: conninfo must be a PostgreSQL connection string or URL")
        if not callable(handler):
            raise TypeError("Worker: handler must be an async function taking a Job")
        self.settings = settings or Settings()
        self._conninfo = conninfo
        self._handler = handler
        self._on_prompt_done = on_prompt_done
        self._runs: dict[str, _Run] = {}
        self._wake = asyncio.Event()
        self._claiming = False
        self._stopping = False
        self._started = False
        self._done = asyncio.Event()
        self._pool: Pool | None = None
        self._lanes: list[Lane] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._claim_task: asyncio.Task[None] | None = None
        self._listen_task: asyncio.Task[None] | None = None
        self._lease: ProcessLease | None = None
        self._stop_lock = asyncio.Lock()

    @property
    def worker_id(self) -> str:
        return self.settings.worker_id

    @property
    def running(self) -> int:
        """Prompts held now (claimed, running or settling)."""
        return len(self._runs)

    @property
    def lanes(self) -> list[Lane]:
        return list(self._lanes)

    async def start(self) -> None:
        """Connects, listens on ``convo_prompts`` and starts claiming; returns
        once it listens (so a prompt queued from then on is heard). Raises
        when the database cannot be reached."""
        if self._started:
            raise RuntimeError("Worker.start: the worker was started already")
        self._started = True
        s = self.settings
        listener = await connect(self._conninfo, s.worker_id, s.call_timeout)
        try:
            await listener.execute(f"LISTEN {PROMPTS_CHANNEL}")
        except BaseException:
            await close_quietly(listener)
            raise
        self._pool = Pool(self._conninfo, s.worker_id, s.db_connections, s.call_timeout)
        self._lanes = [Lane(self._conninfo, s, n) for n in range(s.lanes)]
        self._tasks = [asyncio.create_task(lane.run(), name=f"convo-worker lane {lane.number}") for lane in self._lanes]
        self._listen_task = asyncio.create_task(self._listen(listener), name="convo-worker listener")
        # The first heartbeat takes the lease (letting go of whatever a dead
        # process of the same name held); the claim loop waits for it. A
        # later answer than the lease is of no use: it ran out meanwhile.
        self._lease = ProcessLease(
            Pool(self._conninfo, s.worker_id, 1, min(s.call_timeout, s.lease_seconds)), s,
            lost=self._lease_lost, taken=self._wake.set, check=self._stop_gone)
        self._lease.start()
        self._claiming = True
        self._claim_task = asyncio.create_task(self._claim_loop(), name="convo-worker claims")
        log.info("worker %s started: %d slots, %d lanes", s.worker_id, s.slots, s.lanes)

    async def wait(self) -> None:
        """Returns once the worker has stopped (``stop`` or ``drain``)."""
        await self._done.wait()

    async def run(self) -> None:
        """Starts the worker and returns once it has stopped."""
        await self.start()
        await self.wait()

    async def serve(self) -> None:
        """Runs the worker (starting it if need be) until SIGTERM or SIGINT,
        then drains it for ``settings.drain_timeout`` and returns: the
        replies in flight may finish meanwhile; those still running then
        fail with an error that says the worker is shutting down."""
        if not self._started:
            await self.start()
        loop = asyncio.get_running_loop()
        draining: list[asyncio.Task[None]] = []

        def on_signal() -> None:
            if not draining:
                log.info("worker %s: signal received, draining", self.worker_id)
                draining.append(asyncio.create_task(self.drain(self.settings.drain_timeout)))

        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal)
        try:
            await self.wait()
            if draining:
                await draining[0]
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)

    async def drain(self, timeout: float | None = None) -> None:
        """Stops claiming at once and lets the prompts in flight finish for
        up to timeout seconds (None: ``settings.drain_timeout``); then stops
        the rest as ``stop`` does."""
        if timeout is None:
            timeout = self.settings.drain_timeout
        await self._stop_claiming()
        runs = [r.task for r in self._runs.values()]
        if runs:
            _, pending = await asyncio.wait(runs, timeout=timeout)
            if pending:
                log.warning("worker %s drained: stopping the %d prompts still in flight", self.worker_id, len(pending))
        await self.stop()

    async def stop(self) -> None:
        """Stops claiming, stops the handlers in flight and fails their
        prompts (``worker … stopped before the reply finished (shutting
        down)``), hands prompts claimed but not started back to the queue,
        writes what is left and closes the connections. Safe to call more
        than once."""
        async with self._stop_lock:
            if self._done.is_set() or not self._started:
                self._done.set()
                return
            self._stopping = True
            await self._stop_claiming()
            for run in list(self._runs.values()):
                run.stop("shutdown", f"worker {self.worker_id} is shutting down")
            runs = [r.task for r in self._runs.values()]
            if runs:
                await asyncio.wait(runs)
            for lane in self._lanes:
                lane.close()
            if self._tasks:
                await asyncio.wait(self._tasks)
            # The lease outlives the prompts in flight (a drain lets them
            # finish), as the lanes do.
            if self._lease is not None:
                await self._lease.stop()
            if self._listen_task is not None:
                self._listen_task.cancel()
                await asyncio.wait([self._listen_task])
            if self._pool is not None:
                await self._pool.close()
            log.info("worker %s stopped", self.worker_id)
            self._done.set()

    async def _stop_claiming(self) -> None:
        self._claiming = False
        self._wake.set()
        if self._claim_task is not None:
            # A claim in flight finishes: its prompts run (or, when
            # stopping, are handed back) rather than stay held.
            await asyncio.wait([self._claim_task])

    # --- notifications -------------------------------------------------

    async def _listen(self, conn: psycopg.AsyncConnection[Any] | None) -> None:
        """Hears ``queued:`` (claim) and ``cancelled:`` (stop that prompt)
        until cancelled; reconnects with backoff, and after a reconnect makes
        the claim loop look and checks the prompts in flight, in case a
        notification was missed."""
        delay = 0.1
        s = self.settings
        try:
            while True:
                try:
                    if conn is None:
                        conn = await connect(self._conninfo, s.worker_id, s.call_timeout)
                        await conn.execute(f"LISTEN {PROMPTS_CHANNEL}")
                        log.info("worker %s: listening again", s.worker_id)
                        # What it may have missed while away: queued
                        # prompts (the claim loop looks) and cancels (the
                        # prompts in flight are checked).
                        self._wake.set()
                        if self._lease is not None:
                            self._lease.check_now()
                    delay = 0.1
                    notifies = conn.notifies()
                    while True:
                        try:
                            n = await asyncio.wait_for(anext(notifies), _LISTEN_PING_INTERVAL)
                        except TimeoutError:
                            # The wait was cancelled while it waited for the
                            # socket (the generator ended, the connection idle).
                            await notifies.aclose()
                            await asyncio.wait_for(conn.execute("SELECT 1"), _LISTEN_PING_TIMEOUT)
                            notifies = conn.notifies()
                            continue
                        self._notified(n.payload)
                except Exception as err:
                    # Not only the connection's errors (psycopg, OS, a ping
                    # that timed out): anything else, a bug included, must
                    # not end the listener for good, or no cancel would be
                    # heard again until the worker restarts. (Cancelling the
                    # task is a BaseException, not caught here.)
                    if isinstance(err, (psycopg.Error, OSError, TimeoutError)):
                        log.warning("worker %s: listener: %s; reconnecting in %.1fs", s.worker_id, message_of(err), delay)
                    else:
                        log.exception("worker %s: listener failed; reconnecting in %.1fs", s.worker_id, delay)
                    await close_quietly(conn)
                    conn = None
                    await asyncio.sleep(delay * (0.5 + random.random()))
                    delay = min(2 * delay, 5.0)
        finally:
            await close_quietly(conn)

    def _notified(self, payload: str) -> None:
        kind, _, prompt_id = payload.partition(":")
        if kind == "queued":
            self._wake.set()
        elif kind == "cancelled":
            run = self._runs.get(prompt_id)
            if run is not None:
                run.stop("cancelled", f"prompt {prompt_id} was cancelled")

    # --- the process lease ---------------------------------------------

    def _lease_lost(self) -> None:
        for run in list(self._runs.values()):
            run.stop("lost", LEASE_LOST)

    async def _stop_gone(self) -> None:
        """Stops the replies in flight whose prompts are no longer this
        worker's (one read for them all, after a heartbeat): cancelled ones
        as a cancellation, the others as lost. A reply settling or parking
        its own prompt is left to finish."""
        assert self._pool is not None
        ids = list(self._runs)
        if not ids:
            return
        for prompt_id, status in await self._pool.fetch(_GONE_SQL, (self.worker_id, ids)):
            run = self._runs.get(prompt_id)
            if run is None or status == "completed" or (run.settling and status in ("failed", "")):
                continue
            if status == "cancelled":
                run.stop("cancelled", f"prompt {prompt_id} was cancelled")
            else:
                held = status or "held by another worker or none"
                run.stop("lost", f"prompt {prompt_id} is no longer this worker's ({held})")

    # --- claims ---------------------------------------------------------

    async def _claim_loop(self) -> None:
        """Claims while slots are free and the process lease is live (a
        claim without it would hold prompts that nothing keeps alive; the
        heartbeat wakes the loop when it takes the lease), until claiming
        stops; a claim that straddles a lapse of the lease hands its
        prompts back. With nothing
        to claim it waits for a notification, a slot that frees or the
        poll interval (with jitter); after a failed claim (PostgreSQL
        restarting) it tries again after a backoff instead, since the
        notification that woke it is spent."""
        s = self.settings
        retry = 0.1
        while self._claiming:
            self._wake.clear()
            free = s.slots - len(self._runs)
            failed = False
            assert self._lease is not None
            epoch, live = self._lease.live()
            if free > 0 and live:
                n = min(free, _CLAIM_BATCH)
                try:
                    rows = await self._claim(n, min(s.reserved_slots, n))
                except Exception as err:
                    log.warning("worker %s: claim prompts: %s", s.worker_id, message_of(err))
                    rows, failed = [], True
                if rows and not self._lease.held(epoch):
                    # The lease ran out during the claim: these prompts are
                    # let go (or will be); hand them back now.
                    for row in rows:
                        await self._release_unstarted(row[0])
                    continue
                for row in rows:
                    self._start_run(row)
                if rows:
                    retry = 0.1
                    continue  # perhaps more are queued
            if failed:
                timeout, retry = retry, min(2 * retry, 5.0, s.poll_interval)
            else:
                retry = 0.1
                timeout = s.poll_interval / 2 + random.random() * s.poll_interval
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                pass

    async def _claim(self, n: int, reserved: int) -> list[tuple[Any, ...]]:
        assert self._pool is not None
        s = self.settings
        return await self._pool.fetch(_CLAIM_SQL, (s.worker_id, s.worker_id, s.lease_seconds, n, reserved, s.worker_id))

    async def _release_unstarted(self, prompt_id: str) -> None:
        assert self._pool is not None
        try:
            await self._pool.fetch("SELECT convo.release_prompt(%s, %s)", (prompt_id, self.worker_id))
        except Exception as err:
            log.warning("prompt %s: release it (claimable again when its lease expires): %s", prompt_id, message_of(err))

    def _start_run(self, row: tuple[Any, ...]) -> None:
        prompt_id, conversation_id, message_id, model_config, attempts, resumed, trace_context = row
        run = _Run(self, prompt_id, conversation_id, message_id, model_config or {}, attempts, bool(resumed),
                   trace_context or {})
        self._runs[prompt_id] = run
        run.task = asyncio.create_task(self._run_prompt(run), name=f"convo-worker prompt {prompt_id}")
        if self._stopping:
            run.stop("shutdown", f"worker {self.worker_id} is shutting down")

    async def _run_prompt(self, run: _Run) -> None:
        try:
            result = await run.execute()
        finally:
            self._runs.pop(run.prompt_id, None)
            self._wake.set()  # a slot is free
        if self._on_prompt_done is not None:
            try:
                self._on_prompt_done(result)
            except Exception:
                log.exception("on_prompt_done raised")

    def _lane_for(self, conversation_id: str) -> Lane:
        """A conversation's replies always go through one lane, so that two
        replies of one conversation (an A/B comparison) are written in one
        order."""
        return self._lanes[zlib.crc32(uuid.UUID(conversation_id).bytes) % len(self._lanes)]


def _blocks(rows: list[tuple[Any, ...]]) -> list[ContextBlock]:
    return [
        ContextBlock(message_id=r[0], role=r[1], block_type=r[2], content=r[3] or "", metadata=r[4] or {},
                     tool_call_id=r[5], tool_name=r[6], tool_input=r[7], tool_status=r[8],
                     tool_output=r[9], tool_error=r[10], message_position=r[11])
        for r in rows
    ]


def _retrieve(task: asyncio.Task[None]) -> None:
    """Marks a handler task's exception as seen: the runtime reads it, or
    has settled the prompt without it (the prompt was stopped)."""
    if not task.cancelled():
        task.exception()


class _Run:
    """One claimed prompt in the worker's hands, from its start to its end."""

    def __init__(self, worker: Worker, prompt_id: str, conversation_id: str, message_id: str,
                 model_config: dict[str, Any], attempts: int, resumed: bool = False,
                 trace_context: dict[str, str] | None = None) -> None:
        self.w = worker
        self.trace_context = trace_context or {}
        self.resumed = resumed
        self.prompt_id = prompt_id
        self.conversation_id = conversation_id
        self.message_id = message_id
        self.model_config = model_config
        self.attempts = attempts
        self.task: asyncio.Task[None]
        self.writer: PromptWriter | None = None
        self.job: Job | None = None
        self.handler_task: asyncio.Task[None] | None = None
        self.stop_reason: str | None = None
        self.stop_error: PromptStopped | None = None
        # The run is settling (or parking) the prompt itself: a check that
        # finds it failed or held by none is reading this run's own end.
        self.settling = False

    def stop(self, reason: str, message: str) -> None:
        """The prompt must stop: nothing more of it is written, and the
        handler is cancelled."""
        if self.stop_reason is not None:
            return
        self.stop_reason = reason
        self.stop_error = PromptStopped(reason, message)
        if self.writer is not None:
            self.writer.stop(self.stop_error)
        if self.job is not None:
            self.job.stop_reason = reason
            self.job.stopped.set()
        if self.handler_task is not None and not self.handler_task.done():
            self.handler_task.cancel()

    def _refused(self, err: WriteRefused) -> None:
        # A batch can refuse a cancelled prompt before the notification
        # arrives; write_batch says so in its documented message.
        if err.sqlstate == ILLEGAL_STATE and "is cancelled, not running" in err.message:
            self.stop("cancelled", str(err))
        else:
            self.stop("refused", str(err))

    async def execute(self) -> Result:
        started = time.monotonic()
        try:
            self.writer = PromptWriter(self.w._lane_for(self.conversation_id), self.prompt_id, self._refused)
        except PromptStopped:
            await self._release()
            return Result(self.prompt_id, "stopped", "the worker is shutting down", 0.0, 0)
        if self.stop_reason is not None:
            self.writer.stop(self.stop_error)  # type: ignore[arg-type]
        err = await self._execute()
        self.settling = True
        if err is None and self.writer.parked:
            outcome, error = "waiting", None
        else:
            outcome, error = await self._settle(err)
        self.writer.close()
        result = Result(self.prompt_id, outcome, error, time.monotonic() - started, self.writer.deltas)
        if outcome == "waiting":
            log.info("prompt %s waits for input (%d deltas, %.2fs)", self.prompt_id, result.deltas, result.duration)
        elif outcome == "completed":
            log.info("prompt %s completed (%d deltas, %.2fs)", self.prompt_id, result.deltas, result.duration)
        elif outcome == "failed":
            log.warning("prompt %s failed: %s", self.prompt_id, error)
        else:
            log.info("prompt %s %s: %s", self.prompt_id, outcome, error)
        return result

    async def _execute(self) -> BaseException | None:
        """Starts the prompt, reads its context, runs the handler and
        completes the reply; returns what went wrong, if anything."""
        assert self.writer is not None
        writer = self.writer
        try:
            # start_prompt goes in the next batch while the context is
            # read; the handler runs once it is written, so a prompt
            # cancelled meanwhile never reaches it.
            writer.enqueue(Op("start_prompt"), urgent=True)
            context = asyncio.create_task(self._read_context())
            try:
                await writer.sync()
            except BaseException:
                context.cancel()
                await asyncio.wait([context])
                raise
            blocks, files, own, inputs = await context
            if self.stop_error is not None:
                return self.stop_error
            self.job = Job(
                prompt_id=self.prompt_id, conversation_id=self.conversation_id, message_id=self.message_id,
                model_config=self.model_config, attempts=self.attempts, worker_id=self.w.worker_id,
                context=blocks, reply=Reply(writer), resumed=self.resumed,
                reply_so_far=own, inputs=inputs, files=files,
                traceparent=self.trace_context.get("traceparent"), tracestate=self.trace_context.get("tracestate"),
            )
            self._bind_inputs(self.job)
            reply = self.job.reply
            self.handler_task = asyncio.create_task(self.w._handler(self.job))
            # The prompt settles when it is stopped, whatever the handler
            # does: one that swallows its CancelledError goes on in the
            # background (every write raising PromptStopped) without
            # holding the slot or the worker's stop.
            self.handler_task.add_done_callback(_retrieve)
            stopped = asyncio.create_task(self.job.stopped.wait())
            try:
                await asyncio.wait([self.handler_task, stopped], return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopped.cancel()
            if self.stop_error is not None:
                return self.stop_error
            if self.handler_task.cancelled():
                return RuntimeError("the handler was cancelled")
            exc = self.handler_task.exception()
            if exc is not None:
                return exc
            reply.end_all()
            self.settling = True
            if writer.requests:
                # Tool calls asked for input: the prompt waits, holding
                # nothing, until answered (then any worker resumes it).
                await writer.park()
                return None
            writer.enqueue_last(Op("complete_prompt"))
            await writer.sync()
            return None
        except Exception as err:
            return err

    async def _read_context(
        self,
    ) -> tuple[list[ContextBlock], ContextFiles, list[ContextBlock], list[InputRequest]]:
        """The conversation before the prompt and its files (each with its
        bytes, unless in S3 or past max_file_bytes); for a resumed prompt
        also the reply so far and its input requests with their answers."""
        pool = self.w._pool
        assert pool is not None
        deadline = asyncio.get_running_loop().time() + self.w.settings.lease_seconds / 2

        async def read(what: str, sql: str) -> list[tuple[Any, ...]]:
            try:
                return await with_retries(what, lambda: pool.fetch(sql, (self.prompt_id, self.w.worker_id)), deadline)
            except Exception as err:
                raise RuntimeError(f"{what}: {message_of(err)}") from err

        context = _blocks(await read("read the conversation", _CONTEXT_SQL))
        files: ContextFiles = {}
        for r in await read("read the conversation's files", _FILES_SQL):
            message_id, position, file_id, filename, media_type, size, sha256, storage, blob_id, chunks = r
            data = None
            if storage == "postgres" and size <= self.w.settings.max_file_bytes:
                data = await self._read_file(file_id, filename, size, sha256, chunks, deadline)
            f = PromptFile(id=file_id, filename=filename, media_type=media_type, size=size, sha256=sha256,
                           storage=storage, blob_id=blob_id, data=data)
            files.setdefault(message_id, (position, []))[1].append(f)
        if not self.resumed:
            return context, files, [], []
        own = _blocks(await read("read the reply so far", _REPLY_SQL))
        call_ids = {b.tool_call_id: b.metadata.get("callId") for b in own
                    if b.tool_call_id is not None and isinstance(b.metadata, dict)}
        inputs = [
            InputRequest(tool_call_id=r[0], call_id=call_ids.get(r[0]) or r[0], name=r[1], input=r[2],
                         tool_call_status=r[3], kind=r[4], request=r[5] or {}, status=r[6], answer=r[7],
                         answered_at=r[8], expires_at=r[9])
            for r in await read("read the answers", _INPUTS_SQL)
        ]
        return context, files, own, inputs

    async def _read_file(self, file_id: str, filename: str, size: int, sha256: str, chunks: int,
                         deadline: float) -> bytes:
        """A file's bytes, a chunk (256 KiB) at a time through
        convo.file_chunk, checked against its size and SHA-256."""
        pool = self.w._pool
        assert pool is not None
        data = bytearray()
        for seq in range(chunks):
            args = (self.prompt_id, self.w.worker_id, file_id, seq)
            try:
                rows = await with_retries("read a file", lambda a=args: pool.fetch(_CHUNK_SQL, a), deadline)
            except Exception as err:
                raise RuntimeError(f"read file {file_id} ({filename}): {message_of(err)}") from err
            data += rows[0][0]
        got = hashlib.sha256(data).hexdigest()
        if len(data) != size or got != sha256:
            raise RuntimeError(f"file {file_id} ({filename}): read {len(data)} bytes with SHA-256 {got}, "
                               f"want {size} bytes with {sha256}")
        return bytes(data)

    def _bind_inputs(self, job: Job) -> None:
        """Gives each input request whose call waits for this worker the
        call to end, writing into the job's reply, its tool_result kept
        for the job's history."""
        assert self.writer is not None

        def keep(text: str, meta: dict[str, Any]) -> None:
            job._results.append(ContextBlock(message_id=self.message_id, role="assistant", block_type="tool_result",
                                             content=text, metadata=meta))

        for inp in job.inputs:
            if inp.tool_call_status != "started":
                continue
            call = ToolCall(self.writer, inp.name, inp.call_id, None, resumed=(inp.tool_call_id, inp.input, inp.kind))
            call._on_result = keep
            inp._call = call

    async def _settle(self, err: BaseException | None) -> tuple[Outcome, str | None]:
        """Decides how the prompt ends after _execute returned err, and
        writes that end when it is ours to write."""
        assert self.writer is not None
        writer = self.writer
        if err is None:
            return "completed", None
        reason = self.stop_reason
        if reason == "cancelled":
            return "cancelled", str(err)
        if reason == "lost":
            return "stopped", str(err)
        if reason == "shutdown":
            await writer.sync_quietly()  # a batch in flight may be starting the prompt
            if not writer.started:
                await self._release()
                return "stopped", "released unstarted: the worker is shutting down"
            message = f"worker {self.w.worker_id} stopped before the reply finished (shutting down)"
        elif reason == "refused":
            refusal = writer.refusal
            message = str(refusal or err)
            if refusal is not None and refusal.sqlstate in (ILLEGAL_STATE, NOT_FOUND):
                gone = await self._why_not_ours()
                if gone is not None:
                    return gone, message
        else:
            # The handler (the model) failed: what it wrote before stays,
            # queued ahead of the fail_prompt below; the prompt does not
            # wait for the input its calls asked for.
            writer.drop_requests()
            message = message_of(err)
        if not writer.started:
            await self._release()
            return "stopped", message
        refusal = await writer.write_final(Op("fail_prompt", {"error": message}))
        if refusal is not None and reason is None and await self._why_not_ours() is None:
            # write_batch refused an op the handler queued before
            # fail_prompt, leaving fail_prompt out with it: the prompt is
            # still ours, so fail it on its own.
            log.warning("prompt %s: %s", self.prompt_id, refusal)
            refusal = await writer.write_final(Op("fail_prompt", {"error": message}))
        if refusal is not None:
            log.warning("prompt %s: fail it (%s): %s", self.prompt_id, message, refusal)
            return "stopped", message
        return "failed", message

    async def _why_not_ours(self) -> Outcome | None:
        """After a refused write: None while the prompt is still ours (the
        write itself was illegal), else how it ended for us."""
        pool = self.w._pool
        assert pool is not None
        deadline = asyncio.get_running_loop().time() + self.w.settings.call_timeout
        try:
            rows = await with_retries("heartbeat", lambda: pool.fetch(
                "SELECT convo.heartbeat(%s, %s), convo.prompt_status(%s, %s)",
                (self.prompt_id, self.w.worker_id, self.prompt_id, self.w.worker_id)), deadline)
        except Exception as err:
            log.warning("prompt %s: heartbeat after a refused write: %s", self.prompt_id, message_of(err))
            return None
        keep, status = rows[0]
        if keep:
            return None
        return "cancelled" if status == "cancelled" else "stopped"

    async def _release(self) -> None:
        """Hands a prompt claimed but never started back to the queue, so
        another worker takes it now rather than when the lease expires."""
        pool = self.w._pool
        if pool is None:
            return
        try:
            await pool.fetch("SELECT convo.release_prompt(%s, %s)", (self.prompt_id, self.w.worker_id))
        except Exception as err:
            log.warning("prompt %s: release it (claimable again when its lease expires): %s", self.prompt_id, message_of(err))
