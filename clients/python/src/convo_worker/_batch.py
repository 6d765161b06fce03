"""Batching: every reply's writes, many replies per transaction.

Each prompt has a ``PromptWriter`` that queues its ops (calls of the SQL
worker API) in order and returns at once; a ``Lane`` writes the queued ops
of all its prompts in one call of ``convo.write_batch`` per tick, on its
own connection. This is the group commit of the runtime: one transaction,
one notification per conversation, whatever the number of replies.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from ._db import ILLEGAL_STATE, close_quietly, connect, log, message_of, retryable, reusable, sqlstate_of
from .errors import PromptStopped, WriteRefused
from .settings import Settings

# The bound of one batch, in appends' worth of ops (see Op.cost): a burst
# (a thousand replies starting at once) is written in several batches, so
# that no event waits long in its batch for the commit.
BATCH_BUDGET = 1500


@dataclass(eq=False)
class Op:
    """One call of the worker API, as an op of ``convo.write_batch``.

    ``text`` holds the pieces of an ``append`` or ``tool_progress``:
    streamed text for the same target joins the last queued op, so a batch
    carries one delta per block however many chunks were streamed."""

    kind: str
    fields: dict[str, Any] = field(default_factory=dict)
    text: list[str] | None = None
    target: str | None = None  # the block or tool call that text goes to
    seq: int = 0  # append: this block's append number, set when taken

    def wire(self, prompt: str) -> dict[str, Any]:
        out: dict[str, Any] = {"op": self.kind, "prompt": prompt, **self.fields}
        if self.text is not None:
            out["text"] = "".join(self.text)
        if self.kind == "append":
            out["seq"] = self.seq
        return out

    def cost(self) -> int:
        if self.kind in ("append", "tool_progress"):
            return 1
        if self.kind == "start_prompt":
            return 12
        if self.kind in ("complete_prompt", "fail_prompt", "wait_prompt"):
            return 20
        return 4

    def describe(self) -> str:
        return {
            "start_prompt": "start the prompt",
            "start_block": f"start a {self.fields.get('type')} block",
            "append": "append to a block",
            "end_block": "end a block",
            "start_tool_call": "start a tool call",
            "tool_progress": "write tool call output",
            "complete_tool_call": "complete a tool call",
            "fail_tool_call": "fail a tool call",
            "complete_prompt": "complete the prompt",
            "fail_prompt": "fail the prompt",
            "request_input": "request input",
            "wait_prompt": "wait for input",
        }.get(self.kind, self.kind)


_ESCAPE = re.compile(r"\\(?:u0000|.)")
_SURROGATE = re.compile("[\ud800-\udfff]")


def encode(ops: list[dict[str, Any]]) -> str:
    """ops as JSON for ``write_batch``, every NUL and every lone surrogate
    written as U+FFFD: PostgreSQL's text and jsonb cannot hold NUL, UTF-8
    cannot encode a lone surrogate (text decoded from JSON escapes split
    across chunks holds them), and either would fail the whole batch, every
    reply in it. A surrogate pair split between two pieces of one delta is
    joined. Escapes are matched whole, so an escaped backslash followed by
    ``u0000`` is left alone."""
    return clean(json.dumps(ops, ensure_ascii=False, separators=(",", ":")))


def clean(text: str) -> str:
    """JSON text with every escaped NUL and every lone surrogate written as
    U+FFFD, as ``encode`` writes it."""
    if _SURROGATE.search(text):
        text = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if "\\u0000" not in text:
        return text
    return _ESCAPE.sub(lambda m: "\\ufffd" if m.group(0) == "\\u0000" else m.group(0), text)


class PromptWriter:
    """Queues the writes of one prompt for its lane, which writes them in
    order, in batches shared with other prompts.

    Once the writer stops (the prompt was cancelled, its lease lost, the
    worker shuts down, or a write was refused) it drops what is queued and
    every write raises the ``PromptStopped`` it stopped with."""

    def __init__(self, lane: Lane, prompt_id: str, on_refused: Callable[[WriteRefused], None]) -> None:
        self.lane = lane
        self.prompt_id = prompt_id
        self._on_refused = on_refused
        self.stopped: PromptStopped | None = None
        self._last: PromptStopped | None = None  # set once the prompt's end is queued
        self.refusal: WriteRefused | None = None  # the write failure that stopped it
        self.queued: list[Op] = []
        self._bytes = 0
        self._appends: dict[str, int] = {}  # block id -> appends taken (delta_seq)
        self._enqueued = 0  # ops ever queued
        self._done = 0  # ops written or dropped
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self.started = False  # start_prompt was applied
        self._wrote = False  # some text was queued
        self._since = 0.0  # when the oldest queued op was queued
        self.deltas = 0  # append and tool_progress ops applied
        # request_input ops of tool calls that wait for a person, held back
        # until park queues them with wait_prompt.
        self.requests: list[Op] = []
        self.parked = False  # wait_prompt was written: the prompt waits
        lane.register(self)

    # --- queueing -----------------------------------------------------

    def check(self) -> None:
        """Raises why the writer stopped, or takes no more writes, if so."""
        if self.stopped is not None:
            raise self.stopped
        if self._last is not None:
            raise self._last

    def enqueue_last(self, op: Op) -> None:
        """Queues op, the prompt's end (``complete_prompt``), urgently:
        every later write raises ``PromptStopped("settled")`` rather than
        being dropped or refused after the end."""
        self.enqueue(op, urgent=True)
        self._last = PromptStopped("settled", f"prompt {self.prompt_id} is being settled; nothing more is written")

    def hold_request(self, op: Op, tool_call: str, block: str) -> None:
        """Holds op, the ``request_input`` of tool_call, for park. When
        the call's record (``start_tool_call``) and the end of its block
        are still queued they are held with it, in the Go runtime's order
        (start, request, end of the block): a client then never sees the
        call started without its request."""
        self.check()
        start = next((o for o in self.queued if o.kind == "start_tool_call" and o.fields.get("toolCall") == tool_call), None)
        if start is None:
            self.requests.append(op)
            return
        end = next((o for o in self.queued if o.kind == "end_block" and o.fields.get("block") == block), None)
        held = [start, op] if end is None else [start, op, end]
        for o in held:
            if o is not op:
                self.queued.remove(o)
                self._enqueued -= 1  # park queues it again
        self.requests.extend(held)

    def drop_requests(self) -> None:
        """Forgets the held input requests (the handler failed: the prompt
        will not wait), queueing again what was held with them, the calls'
        records and the ends of their blocks, so the reply keeps them."""
        held, self.requests = self.requests, []
        if self.stopped is not None:
            return
        for op in held:
            if op.kind != "request_input":
                self._push(op)

    async def park(self) -> None:
        """Writes the held input requests and ``wait_prompt`` as one run of
        ops, which a batch never splits (the lane takes a writer's queue
        whole): the requests commit with the park, before any answer can
        come, so ``wait_prompt`` always parks the prompt. Once written the
        prompt is no longer ours: the writer stops (every write raising
        ``PromptStopped("waiting")``)."""
        self.check()
        if not self.requests:
            raise ValueError("no tool call of the reply requested input")
        for op in self.requests:
            self._push(op)
        self.requests = []
        self.enqueue_last(Op("wait_prompt"))
        self._last = PromptStopped("waiting", f"prompt {self.prompt_id} waits for input; nothing more is written")
        await self.sync()
        self.parked = True
        self.stop(self._last)

    def enqueue(self, op: Op, urgent: bool = False) -> None:
        self.check()
        self._push(op)
        self.lane.queued(urgent)

    def _push(self, op: Op) -> None:
        if not self.queued:
            self._since = time.monotonic()
        self.queued.append(op)
        self._enqueued += 1

    def append_text(self, kind: str, target: str, text: str) -> None:
        """Streams text to a block (``append``) or to a tool call's output
        (``tool_progress``). The reply's first text goes out at once."""
        self.check()
        if not text:
            return
        urgent = not self._wrote
        self._wrote = True
        self._bytes += len(text.encode("utf-8", "surrogatepass"))
        if self._bytes >= self.lane.settings.batch_bytes:
            urgent = True
        last = self.queued[-1] if self.queued else None
        if self.lane.coalesce and last is not None and last.kind == kind and last.target == target:
            assert last.text is not None
            last.text.append(text)
            if urgent:
                self.lane.queued(True)
            return
        id_field = "block" if kind == "append" else "toolCall"
        self._push(Op(kind, {id_field: target}, text=[text], target=target))
        self.lane.queued(urgent)

    async def sync(self) -> None:
        """Waits until every op queued so far is written (or dropped), and
        raises why the writer stopped, if it has. Ops already in a batch
        are waited for even when the writer stops meanwhile."""
        await self._wait(self._enqueued)
        if self.stopped is not None:
            raise self.stopped

    async def sync_quietly(self) -> None:
        """Waits for what is queued or in a batch, whatever became of it."""
        await self._wait(self._enqueued)

    async def _wait(self, want: int) -> None:
        if self._done < want:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiters.append((want, future))
            self.lane.queued(True)
            await future

    async def write_final(self, op: Op) -> WriteRefused | None:
        """Writes op after the writer stopped or its handler ended, and
        returns its refusal, if any: the prompt's end (``fail_prompt``,
        ``complete_prompt``), which must be written whatever stopped the
        handler's writes. Nothing else is accepted from then on."""
        self.stopped = None
        self.refusal = None
        self._push(op)
        self.stopped = PromptStopped("settled", f"prompt {self.prompt_id} is being settled; nothing more is written")
        self.lane.queued(True)
        await self._wait(self._enqueued)
        return self.refusal

    def stop(self, reason: PromptStopped) -> None:
        """Stops the writer: what is queued is dropped, writes raise reason."""
        if self.stopped is None:
            self.stopped = reason
        self._done += len(self.queued)
        self.queued, self._bytes = [], 0
        self._wake()

    def _wake(self) -> None:
        keep = []
        for want, future in self._waiters:
            if future.done():
                continue
            if self._done >= want:
                future.set_result(None)
            else:
                keep.append((want, future))
        self._waiters = keep

    # --- the lane's side ----------------------------------------------

    def waiting_since(self) -> float:
        """When the oldest queued op was queued (a writer with none sorts
        last): the batch serves the longest waiting first."""
        return self._since if self.queued else math.inf

    def take(self) -> list[Op]:
        """Hands the lane the queued ops, numbering appends. (No heartbeat
        rides in a batch: the worker's process lease keeps the prompt
        alive, on its own task and connection.)"""
        if self.stopped is not None and not self.queued:
            return []
        ops, self.queued, self._bytes = self.queued, [], 0
        for op in ops:
            if op.kind == "append":
                assert op.target is not None
                self._appends[op.target] = self._appends.get(op.target, 0) + 1
                op.seq = self._appends[op.target]
        return ops

    def settled(self, ops: list[Op], applied: int, err: WriteRefused | None) -> None:
        """Records the fate of ops the lane took: the first ``applied`` were
        written; the rest were not, for err."""
        self._done += len(ops)
        for op in ops[:applied]:
            if op.kind == "start_prompt":
                self.started = True
            elif op.kind in ("append", "tool_progress"):
                self.deltas += 1
        if err is not None and self.refusal is None:
            self.refusal = err
            self.stop(PromptStopped("refused", str(err)))
            self._on_refused(err)
        self._wake()

    def close(self) -> None:
        self.stop(PromptStopped("settled", f"prompt {self.prompt_id} is settled; nothing more is written"))
        self.lane.unregister(self)


@dataclass
class _Part:
    writer: PromptWriter
    first: int  # index of its first op in the batch
    ops: list[Op]


class Lane:
    """Writes the ops of its prompts, all together, one ``write_batch``
    per tick on one connection.

    Pacing: a batch starts when something waits and the previous one ended
    at least ``batch_interval`` ago and at least as long ago as it took (the
    lane is busy at most half the time, so when PostgreSQL is slow each
    batch carries more text per delta instead of falling behind). Urgent
    ops (a start, an end, a reply's first text, anything waited for) skip
    the interval.

    Exactly once: a batch that fails on the connection, or that PostgreSQL
    asks to retry, is sent again unchanged, same number, for up to a lease;
    ``write_batch`` applies a number once and ``append`` ops carry the
    block's ``delta_seq``."""

    def __init__(self, conninfo: str, settings: Settings, number: int) -> None:
        self.settings = settings
        self.number = number
        self.coalesce = settings.batch_interval >= 0
        self._conninfo = conninfo
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._writers: dict[PromptWriter, None] = {}
        self._pending = False
        self._urgent = False
        self._closing = False
        self._kick = asyncio.Event()
        # The number of the last batch: from the clock, and from the last
        # batch applied for this worker and lane when that is further, so
        # that it grows across restarts of a worker keeping its name.
        self._batch = time.time_ns() // 1000
        self._numbered = False
        self.batches = 0  # batches written (for tests and metrics)

    def register(self, writer: PromptWriter) -> None:
        if self._closing:
            raise PromptStopped("shutdown", "the worker is shutting down")
        self._writers[writer] = None

    def unregister(self, writer: PromptWriter) -> None:
        self._writers.pop(writer, None)

    def queued(self, urgent: bool) -> None:
        self._pending = True
        self._urgent = self._urgent or urgent
        self._kick.set()

    def close(self) -> None:
        """Makes run return once nothing waits to be written."""
        self._closing = True
        self._kick.set()

    async def _wait_kick(self, timeout: float) -> bool:
        self._kick.clear()
        try:
            await asyncio.wait_for(self._kick.wait(), timeout)
            return True
        except TimeoutError:
            return False

    async def run(self) -> None:
        last_end = 0.0
        last_took = 0.0
        try:
            while True:
                if not self._pending:
                    if self._closing:
                        return
                    # Nothing to write: a writer that queues kicks the lane.
                    await self._wait_kick(60.0)
                    continue
                gap = 0.0 if self.settings.batch_interval < 0 else max(self.settings.batch_interval, last_took)
                wait = last_end + gap - time.monotonic()
                if not self._urgent and wait > 0:
                    if await self._wait_kick(wait):
                        continue  # perhaps urgent now
                start = time.monotonic()
                await self._flush()
                last_end = time.monotonic()
                last_took = last_end - start
        finally:
            for writer in list(self._writers):
                writer.stop(PromptStopped("shutdown", "the worker is shutting down"))
            await close_quietly(self._conn)
            self._conn = None

    async def _flush(self) -> None:
        self._pending = self._urgent = False
        writers = sorted(self._writers, key=lambda w: w.waiting_since())
        parts: list[_Part] = []
        wire: list[dict[str, Any]] = []
        cost = 0
        for i, writer in enumerate(writers):
            if cost >= BATCH_BUDGET:
                if any(w.queued for w in writers[i:]):
                    self.queued(True)  # the rest go in the next batch, at once
                break
            ops = writer.take()
            if not ops:
                continue
            parts.append(_Part(writer, len(wire), ops))
            for op in ops:
                wire.append(op.wire(writer.prompt_id))
                cost += op.cost()
        if not wire:
            return
        refused, err = await self._write(wire)
        if err is not None and err.sqlstate is not None and len(parts) > 1:
            # PostgreSQL refused the batch as a whole, which no reply's
            # state explains (write_batch refuses those one by one): write
            # each reply on its own, so that only the culprit fails.
            log.warning("lane %d: batch refused whole (%s); writing its %d replies one by one", self.number, err, len(parts))
            for part in parts:
                end = part.first + len(part.ops)
                rows, one_err = await self._write(wire[part.first : end])
                self._settle([_Part(part.writer, 0, part.ops)], rows, one_err)
            return
        self._settle(parts, refused, err)

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            await close_quietly(self._conn)
            self._conn = await connect(self._conninfo, self.settings.worker_id, self.settings.call_timeout)
        return self._conn

    async def _call(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        async def run() -> list[tuple[Any, ...]]:
            conn = await self._connection()
            async with conn.cursor() as cur:
                await cur.execute(sql, params)
                return await cur.fetchall()

        try:
            return await asyncio.wait_for(run(), self.settings.call_timeout)
        except BaseException:
            # A call cut short leaves the connection in an unknown state.
            if self._conn is not None and not reusable(self._conn):
                await close_quietly(self._conn)
                self._conn = None
            raise

    async def _number_from_mark(self) -> None:
        try:
            rows = await self._call(
                "SELECT batch FROM convo.worker_batch_mark(%s, %s)",
                (self.settings.worker_id, self.number),
            )
        except Exception as err:
            log.warning("lane %d: read the last batch number: %s", self.number, message_of(err))
            return
        if rows:
            self._batch = max(self._batch, int(rows[0][0]))
        self._numbered = True

    async def _write(self, wire: list[dict[str, Any]]) -> tuple[list[tuple[Any, ...]], WriteRefused | None]:
        """Calls write_batch with ops, retrying the same batch (same
        number) while the failure is the connection's or PostgreSQL asks
        for a retry, for at most a lease. Returns the refused prompts'
        rows, or the error that made it give up."""
        encoded = encode(wire)
        if not self._numbered:
            await self._number_from_mark()
        self._batch += 1
        renumbered = False
        loop = asyncio.get_running_loop()
        give_up = loop.time() + self.settings.lease_seconds
        delay = 0.02
        attempt = 0
        while True:
            attempt += 1
            try:
                rows = await self._call(
                    "SELECT prompt_id::text, op_index, code, message FROM convo.write_batch(%s, %s, %s::jsonb, %s)",
                    (self.settings.worker_id, self._batch, encoded, self.number),
                )
                self.batches += 1
                return rows, None
            except Exception as err:
                if sqlstate_of(err) == ILLEGAL_STATE and not renumbered:
                    # Another process numbered this worker's lane further
                    # (the same name, or a clock that went back): go on
                    # from its last batch. Nothing of this one was applied.
                    renumbered = True
                    await self._number_from_mark()
                    self._batch += 1
                    continue
                if not retryable(err) or loop.time() + delay > give_up:
                    return [], WriteRefused("write the batch", message_of(err), sqlstate_of(err))
                log.warning(
                    "lane %d: write a batch: retrying in %.2fs (attempt %d): %s",
                    self.number, delay, attempt, message_of(err),
                )
                await asyncio.sleep(delay)
                delay = min(2 * delay, 2.0)

    def _settle(self, parts: list[_Part], refused: list[tuple[Any, ...]], err: WriteRefused | None) -> None:
        by_prompt = {row[0]: row for row in refused}
        for part in parts:
            if err is not None:
                part.writer.settled(part.ops, 0, err)
                continue
            row = by_prompt.get(part.writer.prompt_id)
            if row is None:
                part.writer.settled(part.ops, len(part.ops), None)
                continue
            _, op_index, code, message = row
            applied = min(max(op_index - part.first, 0), len(part.ops))
            what = part.ops[applied].describe() if applied < len(part.ops) else "write"
            part.writer.settled(part.ops, applied, WriteRefused(what, message, code))
