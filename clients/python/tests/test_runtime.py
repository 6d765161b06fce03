"""The runtime under what goes wrong: cancels, lost leases, broken
connections, a database restart, many replies at once, draining."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import psycopg
import pytest

from conftest import Client, eventually
from convo_worker import Job, PromptStopped
from convo_worker import worker as worker_module
from helpers import running
from proxy import Proxy


@pytest.fixture
async def proxy(dsn: str) -> AsyncIterator[Proxy]:
    p = Proxy(dsn)
    await p.start()
    try:
        yield p
    finally:
        await p.close()


class Streamer:
    """A handler that streams numbered pieces of text until it is told to
    stop streaming (then returns) or is stopped by the runtime; it records
    what happened to it."""

    def __init__(self, pieces: int | None = None, pause: float = 0.02) -> None:
        self.pieces = pieces
        self.pause = pause
        self.jobs: dict[str, Job] = {}
        self.written: dict[str, list[str]] = {}
        self.cancelled: set[str] = set()
        self.refused_writes: list[PromptStopped] = []

    async def __call__(self, job: Job) -> None:
        self.jobs[job.prompt_id] = job
        written = self.written.setdefault(job.prompt_id, [])
        n = 0
        try:
            while self.pieces is None or n < self.pieces:
                piece = f"<{n}>"
                try:
                    job.reply.text(piece)
                except PromptStopped as stopped:
                    self.refused_writes.append(stopped)
                    raise
                written.append(piece)
                n += 1
                await asyncio.sleep(self.pause)
        except asyncio.CancelledError:
            self.cancelled.add(job.prompt_id)
            raise

    def text(self, prompt_id: str) -> str:
        return "".join(self.written[prompt_id])


async def test_cancel_stops_writing_and_frees_the_slot(dsn: str, client: Client) -> None:
    streamer = Streamer()
    async with running(dsn, streamer, slots=1) as (_, recorder):
        prompt = await client.send("stream forever")
        await eventually("text to stream", lambda: client.streamed_text(prompt))
        await client.cancel(prompt)
        await eventually("the handler to be cancelled", lambda: asyncio.sleep(0, prompt in streamer.cancelled))
        job = streamer.jobs[prompt]
        assert job.stopped.is_set() and job.stop_reason == "cancelled"
        # The slot is free: the next prompt runs on the only slot.
        streamer.pieces = 3
        second = await client.send("three pieces")
        assert (await client.settled(second))["status"] == "completed"
        await eventually("the result", lambda: asyncio.sleep(0, recorder.results.get(prompt)))

    assert (await client.prompt(prompt))["status"] == "cancelled"
    assert recorder.results[prompt].outcome == "cancelled"
    # Nothing written after the cancel: every event of the prompt after it
    # is the cancel's own (its transaction).
    cancel_seq, cancel_tx = await client.one(
        "SELECT seq, xmin::text FROM convo.events WHERE prompt_id = %s AND kind = 'promptCancelled'", prompt)
    assert await client.all(
        "SELECT kind FROM convo.events WHERE prompt_id = %s AND seq > %s AND xmin::text <> %s",
        prompt, cancel_seq, cancel_tx) == []
    # What was written is a prefix of what was streamed, and stays.
    kept = (await client.blocks(prompt))[0]["content"]
    assert kept and streamer.text(prompt).startswith(kept)
    assert await client.streamed_text(second) == "<0><1><2>"


async def test_cancel_frees_the_slot_of_a_handler_that_swallows_the_cancellation(dsn: str, client: Client) -> None:
    """A handler that does not let the CancelledError through (a library
    that catches it while it closes a stream, say) must not hold its slot,
    nor stop the worker from stopping: the prompt settles when it is
    stopped, as with the Go and TypeScript runtimes, and the handler's
    writes from then on raise PromptStopped."""
    release = asyncio.Event()
    refused: list[PromptStopped] = []

    async def stubborn(job: Job) -> None:
        if job.last_user_text == "next":
            job.reply.text("served")
            return
        job.reply.text("working")
        while not release.is_set():
            try:
                await release.wait()
            except asyncio.CancelledError:
                pass  # swallowed
        try:
            job.reply.text(" more")
        except PromptStopped as err:
            refused.append(err)

    async with running(dsn, stubborn, slots=1) as (_, recorder):
        prompt = await client.send("stubborn")
        await eventually("text to stream", lambda: client.streamed_text(prompt))
        await client.cancel(prompt)
        await eventually("the result", lambda: asyncio.sleep(0, recorder.results.get(prompt)))
        second = await client.send("next")
        assert (await client.settled(second))["status"] == "completed"
    release.set()
    await eventually("the handler to write once more", lambda: asyncio.sleep(0, refused))

    assert recorder.results[prompt].outcome == "cancelled"
    assert [r.reason for r in refused] == ["cancelled"]
    assert [b["content"] for b in await client.blocks(prompt)] == ["working"]


async def test_expire_lease_fails_the_prompt_under_a_batch_in_flight(dsn: str, client: Client) -> None:
    """The lost-lease tests' expire_lease fails the prompt even when a
    batch has locked its conversation and not yet its row (the batch then
    waits for the row behind expire_lease's update): expire_leases, which
    skips a conversation locked by someone else, used to leave the prompt
    running, and the batch's next heartbeat extended its lease."""
    prompt = await client.send("hold it")
    (claimed,) = await client.one("SELECT count(*) FROM convo.claim_prompts('holder', 30, 1)")
    assert claimed == 1
    await client.one("SELECT convo.start_prompt(%s)", prompt)
    conversation = await client.conversation_of(prompt)
    async with await psycopg.AsyncConnection.connect(dsn) as batch:
        # The first lock write_batch takes.
        await batch.execute("SELECT 1 FROM convo.conversations WHERE id = %s FOR NO KEY UPDATE", (conversation,))
        expiring = asyncio.create_task(client.expire_lease(prompt))

        async def blocked_or_done() -> bool:
            if expiring.done():
                return True
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as look:
                cur = await look.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'")
                row = await cur.fetchone()
                return row is not None and row[0] > 0

        await eventually("expire_lease to wait for the batch's lock (or to return)", blocked_or_done)
        await batch.commit()
        try:
            await expiring
        except AssertionError as err:
            raise AssertionError(f"expire_lease under a batch in flight: {err}") from None
    settled = await client.prompt(prompt)
    assert settled["status"] == "failed" and "lease expired" in settled["error"]


@pytest.mark.parametrize("writing", [True, False], ids=["writing", "idle"])
async def test_lost_lease_stops_the_reply(dsn: str, client: Client, writing: bool) -> None:
    """A prompt failed by lease expiry is no longer the worker's: the next
    batch is refused (writing), or the check of the prompts in flight after
    the next process heartbeat (idle, every third of the 3 s lease) finds
    it failed; the handler is stopped, nothing more is written, the slot
    frees."""

    async def idle(job: Job) -> None:
        if job.last_user_text == "again":
            job.reply.text("done")
            return
        job.reply.text("waiting on a tool")
        streamer.jobs[job.prompt_id] = job
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            streamer.cancelled.add(job.prompt_id)
            raise

    streamer = Streamer()
    handler = streamer if writing else idle
    async with running(dsn, handler, slots=1, lease_seconds=3) as (_, recorder):
        prompt = await client.send("stream")
        await eventually("text to stream", lambda: client.streamed_text(prompt))
        await client.expire_lease(prompt)
        await eventually("the handler to be stopped", lambda: asyncio.sleep(0, prompt in streamer.cancelled))
        assert streamer.jobs[prompt].stop_reason == ("refused" if writing else "lost")
        await eventually("the result", lambda: asyncio.sleep(0, recorder.results.get(prompt)))
        streamer.pieces = 2
        second = await client.send("again")
        assert (await client.settled(second))["status"] == "completed"

    settled = await client.prompt(prompt)
    assert settled["status"] == "failed" and "lease expired" in settled["error"]
    assert recorder.results[prompt].outcome == "stopped"
    kept = (await client.blocks(prompt))[0]["content"]
    assert kept.startswith("<0>" if writing else "waiting on a tool")


async def test_many_replies_share_transactions(dsn: str, client: Client) -> None:
    streamer = Streamer(pieces=15, pause=0.01)
    async with running(dsn, streamer, slots=8):
        prompts = [await client.send(f"reply {i}", owner=f"user{i}") for i in range(8)]
        for p in prompts:
            assert (await client.settled(p))["status"] == "completed"

    for p in prompts:
        assert (await client.blocks(p))[0]["content"] == streamer.text(p)
    # One transaction (xmin) wrote deltas of several conversations.
    (widest,) = await client.one(
        """SELECT max(n) FROM (SELECT count(DISTINCT conversation_id) AS n FROM convo.events
                                WHERE kind = 'blockDelta' GROUP BY xmin::text) t""")
    assert widest >= 2, "no transaction wrote deltas of two replies"


async def test_batch_resent_after_its_connection_broke_is_applied_once(dsn: str, client: Client, proxy: Proxy) -> None:
    """The connection breaks after write_batch committed and before its
    answer came back: the worker sends the same batch again (same number)
    on a new connection, and write_batch answers without applying it
    again. The batch holds a tool's output, which (unlike a block's text,
    numbered by delta_seq) only the batch number keeps from doubling."""
    marker = "CUT-AFTER-THIS"

    async def handle(job: Job) -> None:
        job.reply.text("before ")
        call = job.reply.tool_call("search", {"q": "x"})
        await job.reply.flush()
        proxy.cut_after_commit(marker)
        call.progress(f"found {marker}")
        await job.reply.flush()
        call.complete(" done")
        job.reply.text(" after")

    async with running(proxy.dsn, handle, slots=1):
        prompt = await client.send("hi")
        assert (await client.settled(prompt))["status"] == "completed"

    assert proxy.cuts == 1
    blocks = await client.blocks(prompt)
    assert blocks[1]["toolCall"]["output"] == f"found {marker} done"
    assert (await client.one(
        "SELECT count(*) FROM convo.events WHERE prompt_id = %s AND kind = 'toolCallProgress'", prompt))[0] == 1
    assert [b["content"] for b in blocks if b["type"] == "text"] == ["before ", " after"]


async def test_database_restart_mid_reply_resumes_writing(dsn: str, client: Client, proxy: Proxy) -> None:
    """Every connection is cut and new ones refused for a second: the
    batches wait and are sent again, the reply goes on with nothing lost or
    doubled, and the listener reconnects (a prompt sent afterwards is
    claimed without waiting for the poll)."""
    streamer = Streamer(pieces=60, pause=0.03)
    async with running(proxy.dsn, streamer, slots=2, poll_interval=120.0):
        prompt = await client.send("long")
        await eventually("text to stream", lambda: client.streamed_text(prompt))
        await proxy.outage(1.0)
        assert (await client.settled(prompt, timeout=30))["status"] == "completed"
        streamer.pieces = 2
        second = await client.send("after the restart")
        assert (await client.settled(second, timeout=30))["status"] == "completed"

    assert await client.streamed_text(prompt) == streamer.text(prompt)
    assert (await client.blocks(prompt))[0]["content"] == streamer.text(prompt)


async def test_connections_terminated_by_the_server_mid_reply(dsn: str, client: Client) -> None:
    """PostgreSQL ends the worker's sessions (SQLSTATE 57P01, as in a
    restart): the same recovery, through the server's own error."""
    streamer = Streamer(pieces=40, pause=0.03)
    async with running(dsn, streamer, slots=1):
        prompt = await client.send("long")
        await eventually("text to stream", lambda: client.streamed_text(prompt))
        (ended,) = await client.one(
            """SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                WHERE application_name LIKE 'convo-worker%%' AND datname = current_database()""")
        assert ended >= 2
        assert (await client.settled(prompt, timeout=30))["status"] == "completed"

    assert await client.streamed_text(prompt) == streamer.text(prompt)


async def test_listener_reconnects_when_its_connection_goes_silent(
        dsn: str, client: Client, proxy: Proxy, monkeypatch: pytest.MonkeyPatch) -> None:
    """A LISTEN connection that stops answering without a reset is pinged,
    found dead and made again: a cancel is heard through the new one (the
    heartbeat that would refuse it comes only every 20 s here)."""
    monkeypatch.setattr(worker_module, "_LISTEN_PING_INTERVAL", 0.2)

    async def wait(job: Job) -> None:
        job.reply.text("waiting")
        await asyncio.Event().wait()

    async with running(proxy.dsn, wait, slots=1, lease_seconds=60) as (_, recorder):
        prompt = await client.send("wait")
        await eventually("text to stream", lambda: client.streamed_text(prompt))
        proxy.freeze_listeners()
        await client.cancel(prompt)

        async def heard() -> object:
            # The cancel's own notification went to the frozen connection.
            await client.one("SELECT pg_notify('convo_prompts', %s)", f"cancelled:{prompt}")
            return recorder.results.get(prompt)

        await eventually("the cancel heard through a new LISTEN connection", heard)

    assert recorder.results[prompt].outcome == "cancelled"


async def test_listener_survives_an_unexpected_error(
        dsn: str, client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """An error the listener does not expect (here, handling a
    notification raises) ends that connection, not the listener: it
    listens again, and a later cancel is still heard at once."""
    original = worker_module.Worker._notified
    raised: list[str] = []

    def notified(self: worker_module.Worker, payload: str) -> None:
        if payload == "boom" and not raised:
            raised.append(payload)
            raise RuntimeError("a bug while handling a notification")
        original(self, payload)

    monkeypatch.setattr(worker_module.Worker, "_notified", notified)

    async def wait(job: Job) -> None:
        job.reply.text("waiting")
        await asyncio.Event().wait()

    # A long lease: only a notification stops the reply in time.
    async with running(dsn, wait, slots=1, lease_seconds=60) as (_, recorder):
        await client.one("SELECT pg_notify('convo_prompts', 'boom')")
        await eventually("the bad notification handled", lambda: asyncio.sleep(0, bool(raised)))
        prompt = await client.send("wait")
        await eventually("text to stream", lambda: client.streamed_text(prompt))
        await client.cancel(prompt)
        await eventually("the cancel heard", lambda: asyncio.sleep(0, recorder.results.get(prompt)), timeout=10)

    assert recorder.results[prompt].outcome == "cancelled"


async def test_drain_finishes_short_replies_and_fails_the_rest(dsn: str, client: Client) -> None:
    async def handle(job: Job) -> None:
        if job.last_user_text == "short":
            for piece in ("a", "b", "c"):
                job.reply.text(piece)
                await asyncio.sleep(0.3)
        else:
            job.reply.text("forever")
            await asyncio.Event().wait()

    async with running(dsn, handle, slots=2) as (worker, recorder):
        short = await client.send("short", owner="a")
        long = await client.send("long", owner="b")
        await eventually("both to stream", lambda: asyncio.sleep(0, worker.running == 2))
        await eventually("text", lambda: client.streamed_text(long))
        await worker.drain(2.0)
        later = await client.send("sent while stopped", owner="c")

    assert (await client.prompt(short))["status"] == "completed"
    assert (await client.blocks(short))[0]["content"] == "abc"
    failed = await client.prompt(long)
    assert failed["status"] == "failed" and "shutting down" in failed["error"]
    assert (await client.blocks(long))[0]["content"] == "forever"
    assert recorder.results[long].outcome == "failed"
    assert (await client.prompt(later)) == {"status": "queued", "error": None, "worker": None}
