"""The reply a handler writes, end to end through PostgreSQL: every kind
of block, tool calls, a handler that fails, bad input."""

from __future__ import annotations

import asyncio
import json

import pytest

from conftest import Client, eventually
from convo_worker import InvalidOutput, Job, PromptStopped, Settings
from helpers import running


async def test_text_reasoning_structured(dsn: str, client: Client) -> None:
    seen: list[Job] = []

    async def handle(job: Job) -> None:
        seen.append(job)
        job.reply.reasoning("Thinking")
        job.reply.reasoning(" hard.")
        for piece in ["Hello", ", ", "world", "!"]:
            job.reply.text(piece)
            await asyncio.sleep(0.01)
        job.reply.structured('{"answer": ')
        job.reply.structured("42}")

    async with running(dsn, handle):
        prompt = await client.send("What is the answer?", config={"model": "m1", "temperature": 0.5})
        assert (await client.settled(prompt))["status"] == "completed"

    blocks = await client.blocks(prompt)
    assert [(b["type"], b["status"], b["content"]) for b in blocks] == [
        ("reasoning", "completed", "Thinking hard."),
        ("text", "completed", "Hello, world!"),
        ("structured", "completed", '{"answer": 42}'),
    ]
    job = seen[0]
    assert job.prompt_id == prompt
    assert job.model_config == {"model": "m1", "temperature": 0.5}
    assert job.attempts == 1
    assert job.last_user_text == "What is the answer?"
    assert [(m.role, m.text) for m in job.messages] == [("user", "What is the answer?")]


async def test_tool_call_with_progress_and_result(dsn: str, client: Client) -> None:
    async def handle(job: Job) -> None:
        job.reply.text("Let me look.")
        call = job.reply.start_tool_call("weather", call_id="call_1")
        call.arguments('{"city": ')
        call.arguments('"Paris"}')
        assert call.finish_arguments() == {"city": "Paris"}
        call.progress("fetching … ")
        call.complete("sunny")
        failing = job.reply.tool_call("echo", {"text": "hi"}, call_id="call_2")
        failing.fail("echo is broken")
        bad = job.reply.start_tool_call("echo", call_id="call_3")
        bad.arguments("{not json")
        assert bad.finish_arguments() is None and bad.status == "failed"
        job.reply.text("It is sunny.")

    async with running(dsn, handle):
        prompt = await client.send("Weather in Paris?")
        assert (await client.settled(prompt))["status"] == "completed"

    blocks = await client.blocks(prompt)
    assert [b["type"] for b in blocks] == ["text", "tool_use", "tool_result", "tool_use", "tool_result",
                                           "tool_use", "tool_result", "text"]
    use, result = blocks[1], blocks[2]
    assert use["content"] == '{"city": "Paris"}'
    assert use["metadata"] == {"name": "weather", "callId": "call_1"}
    assert use["toolCall"] == {"name": "weather", "input": {"city": "Paris"}, "status": "completed",
                               "output": "fetching … sunny", "error": None}
    assert result["content"] == "sunny"
    assert result["metadata"]["callId"] == "call_1" and result["metadata"]["tool"] == "weather"
    assert blocks[3]["content"] == '{"text":"hi"}'
    assert blocks[3]["toolCall"]["status"] == "failed" and blocks[3]["toolCall"]["error"] == "echo is broken"
    assert blocks[4]["content"] == "error: echo is broken" and blocks[4]["metadata"]["isError"] is True
    assert blocks[5]["toolCall"]["input"] == "{not json"
    assert blocks[5]["toolCall"]["error"].startswith("invalid argument JSON for tool echo")
    assert blocks[7]["content"] == "It is sunny."


async def test_history_of_earlier_turns(dsn: str, client: Client) -> None:
    """The handler of a second message sees the first exchange, tool call
    and result included, from convo.prompt_context."""
    seen: list[Job] = []

    async def handle(job: Job) -> None:
        seen.append(job)
        if len(seen) == 1:
            job.reply.tool_call("echo", {"text": "ping"}, call_id="c1").complete("ping")
            job.reply.text("Echoed.")
        else:
            job.reply.text("Second.")

    async with running(dsn, handle):
        first = await client.send("first")
        await client.settled(first)
        second = await client.send("second", conversation=await client.conversation_of(first))
        assert (await client.settled(second))["status"] == "completed"

    messages = seen[1].messages
    assert [(m.role, m.text) for m in messages] == [
        ("user", "first"), ("assistant", ""), ("tool", "ping"), ("assistant", "Echoed."), ("user", "second")]
    assert messages[1].tool_calls[0].name == "echo" and messages[1].tool_calls[0].arguments == '{"text": "ping"}'
    assert messages[2].tool_call_id == messages[1].tool_calls[0].id


async def test_handler_error_fails_prompt_and_keeps_partial_reply(dsn: str, client: Client) -> None:
    async def handle(job: Job) -> None:
        job.reply.text("Partial ")
        job.reply.text("answer")
        raise RuntimeError("upstream overloaded (server_error)")

    async with running(dsn, handle) as (_, recorder):
        prompt = await client.send("hi")
        settled = await client.settled(prompt)
        await eventually("the result", lambda: asyncio.sleep(0, recorder.results.get(prompt)))

    assert settled == {"status": "failed", "error": "upstream overloaded (server_error)", "worker": "pytest-worker"}
    assert [(b["type"], b["status"], b["content"]) for b in await client.blocks(prompt)] == [
        ("text", "completed", "Partial answer")]
    assert recorder.results[prompt].outcome == "failed"


async def test_invalid_structured_output_fails_prompt(dsn: str, client: Client) -> None:
    async def handle(job: Job) -> None:
        job.reply.start_block("structured").append('{"answer": ')

    async with running(dsn, handle):
        prompt = await client.send("hi")
        settled = await client.settled(prompt)
    assert settled["status"] == "failed"
    assert settled["error"].startswith("the structured output is not valid JSON")


async def test_tool_arguments_out_of_range_fail_the_call_and_are_kept_as_text(dsn: str, client: Client) -> None:
    # json.loads reads 1e400 as inf: convo's rule (jsonlimit) reads the
    # text the model streamed, and the call fails with the wording of the
    # Go and TypeScript runtimes; the reply completes.
    why = ("invalid arguments for tool calculator: $.expression: number 1e400 is outside the range of a "
           "64-bit float (magnitude between 5e-324 and 1.7e308, or 0)")
    refused: list[str] = []

    async def handle(job: Job) -> None:
        call = job.reply.start_tool_call("calculator", call_id="call_1")
        call.arguments('{"expression": ')
        call.arguments("1e400}")
        assert call.finish_arguments() is None and call.status == "failed" and call.error == why
        deep = job.reply.start_tool_call("calculator", call_id="call_2")
        deep.arguments("[" * 65 + "]" * 65)
        assert deep.finish_arguments() is None and deep.status == "failed"
        huge: dict[str, object] = {"n": 10**400}
        for bad in (lambda: job.reply.start_block("note", metadata=huge),
                    lambda: job.reply.tool_call("calculator", {"expression": "1"}).request_input("client_tool", {"outputSchema": huge})):
            with pytest.raises(ValueError) as info:
                bad()
            refused.append(str(info.value))
        job.reply.text("My number was too big.")

    async with running(dsn, handle):
        prompt = await client.send("compute")
        assert (await client.settled(prompt))["status"] == "completed"

    blocks = await client.blocks(prompt)
    assert [b["type"] for b in blocks] == ["tool_use", "tool_result", "tool_use", "tool_result", "tool_use", "text"]
    call = blocks[0]["toolCall"]
    assert (call["name"], call["input"], call["status"], call["error"]) == ("calculator", '{"expression": 1e400}', "failed", why)
    assert blocks[1]["content"] == f"error: {why}"
    assert blocks[2]["toolCall"]["error"] == ("invalid arguments for tool calculator: $" + "[0]" * 64
                                              + ": nested deeper than 64 levels")
    assert refused[0].startswith("Reply.start_block: metadata: $.n: number 1000000000") and "outside the range" in refused[0]
    assert refused[1].startswith("ToolCall.request_input: request: $.outputSchema.n: number 1000000000")


async def test_bad_input_is_refused_naming_the_field_and_writes_nothing(dsn: str, client: Client) -> None:
    errors: list[str] = []

    async def handle(job: Job) -> None:
        for bad in (lambda: job.reply.start_block("Not Lower"),
                    lambda: job.reply.start_block("note", metadata=["not", "a", "dict"]),  # type: ignore[arg-type]
                    lambda: job.reply.text(42),  # type: ignore[arg-type]
                    lambda: job.reply.start_tool_call(""),
                    lambda: job.reply.tool_call("echo", {"x": object()}),
                    lambda: job.reply.start_block("note", metadata={"score": float("nan")}),
                    lambda: job.reply.tool_call("echo", {"limit": float("inf")})):
            with pytest.raises((ValueError, TypeError)) as info:
                bad()
            errors.append(str(info.value))
        block = job.reply.start_block("structured")
        block.append('{"a": ')
        with pytest.raises(InvalidOutput, match="not valid JSON"):
            block.end()
        block.append("1}")  # mended: the runtime ends it when the handler returns
        job.reply.text("fine")

    async with running(dsn, handle):
        prompt = await client.send("hi")
        assert (await client.settled(prompt))["status"] == "completed"

    assert "block_type" in errors[0] and "metadata" in errors[1] and "delta" in errors[2]
    assert "name" in errors[3] and "input" in errors[4]
    assert "metadata must be JSON-serializable" in errors[5] and "input must be JSON-serializable" in errors[6]
    assert [(b["type"], b["content"]) for b in await client.blocks(prompt)] == [("structured", '{"a": 1}'), ("text", "fine")]


def test_settings_refuse_out_of_range_values_naming_the_field() -> None:
    for field, value in [("slots", 0), ("reserved_slots", 5), ("lease_seconds", 1), ("lanes", 0),
                         ("batch_interval", "20ms"), ("worker_id", " "), ("poll_interval", 0)]:
        with pytest.raises(ValueError, match=f"Settings.{field}"):
            Settings(**{field: value})  # type: ignore[arg-type]
    assert json.dumps(Settings().heartbeat_interval) == "10.0"


async def test_lone_surrogates_become_replacement_characters_and_fail_no_reply(dsn: str, client: Client) -> None:
    # Text decoded from JSON escapes split across chunks ("\ud83d" then
    # "\ude00") holds lone surrogates, which UTF-8 cannot encode. The three
    # replies write in the same tick, so their ops share one batch: such
    # text must neither fail the batch nor the other replies.
    together = asyncio.Barrier(3)

    async def handle(job: Job) -> None:
        await together.wait()
        if job.last_user_text == "split":
            job.reply.text("smile \ud83d")
            job.reply.text("\ude00 done")
        elif job.last_user_text == "lone":
            job.reply.text("broken \ud83d")
        else:
            job.reply.text("fine")

    async with running(dsn, handle, slots=3, lanes=1):
        prompts = {text: await client.send(text, owner=text) for text in ("split", "lone", "plain")}
        settled = {text: await client.settled(p) for text, p in prompts.items()}

    assert {text: s["status"] for text, s in settled.items()} == {"split": "completed", "lone": "completed", "plain": "completed"}
    assert [b["content"] for b in await client.blocks(prompts["split"])] == ["smile \U0001f600 done"]
    assert [b["content"] for b in await client.blocks(prompts["lone"])] == ["broken \ufffd"]
    assert [b["content"] for b in await client.blocks(prompts["plain"])] == ["fine"]


async def test_writes_after_the_handler_returned_are_refused_not_dropped(dsn: str, client: Client) -> None:
    # A task the handler left behind keeps writing. Every write it makes
    # either reaches the reply or raises: once the runtime has queued
    # complete_prompt the reply takes nothing more (as after fail_prompt),
    # rather than accepting writes that it drops or that write_batch
    # refuses after the completion.
    accepted: list[int] = []
    refused: list[PromptStopped] = []
    tasks: list[asyncio.Task[None]] = []

    async def keep_writing(job: Job) -> None:
        loop = asyncio.get_running_loop()
        give_up = loop.time() + 10
        while loop.time() < give_up:
            try:
                job.reply.text(" late")
            except PromptStopped as err:
                refused.append(err)
                return
            accepted.append(1)
            await asyncio.sleep(0)

    async def handle(job: Job) -> None:
        job.reply.text("answer")
        tasks.append(asyncio.create_task(keep_writing(job)))

    async with running(dsn, handle) as (_, recorder):
        prompt = await client.send("hi")
        assert (await client.settled(prompt))["status"] == "completed"
        await eventually("the result", lambda: asyncio.sleep(0, recorder.results.get(prompt)))
        await asyncio.wait(tasks)

    assert recorder.results[prompt].outcome == "completed", recorder.results[prompt]
    assert [r.reason for r in refused] == ["settled"]
    text = "".join(b["content"] for b in await client.blocks(prompt))
    assert text == "answer" + " late" * len(accepted)


async def test_fails_the_prompt_when_an_op_queued_just_before_the_handler_raised_is_refused(dsn: str, client: Client) -> None:
    # The refused op and fail_prompt share a batch: write_batch leaves out
    # the prompt's ops from the refused one on, fail_prompt included. The
    # prompt is still this worker's, so it must be failed now, not left
    # running until its lease ends.
    await client.conn.execute("""
        CREATE FUNCTION public.refuse_notes() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            RAISE EXCEPTION 'notes are not taken here';
        END $$;
        CREATE TRIGGER refuse_notes BEFORE INSERT ON convo.blocks
            FOR EACH ROW WHEN (NEW.block_type = 'note') EXECUTE FUNCTION public.refuse_notes()""")

    async def handle(job: Job) -> None:
        job.reply.text("so far")
        await job.reply.flush()
        job.reply.start_block("note")
        raise RuntimeError("the model broke")

    async with running(dsn, handle, lease_seconds=60) as (_, recorder):
        prompt = await client.send("hi")
        settled = await client.settled(prompt)
        await eventually("the result", lambda: asyncio.sleep(0, recorder.results.get(prompt)))

    # The handler's error, as the Go runtime fails it.
    assert settled == {"status": "failed", "error": "the model broke", "worker": "pytest-worker"}
    assert recorder.results[prompt].outcome == "failed"
    assert [b["content"] for b in await client.blocks(prompt)] == ["so far"]
