"""The OpenAI adapters against a fake OpenAI-compatible server, the
events read both as dicts and as SDK-like objects, written through a
worker into PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from conftest import Client
from convo_worker import Job
from convo_worker.openai import (
    ModelError,
    chat_messages,
    function_call_output,
    responses_input,
    tool_message,
    write_chat_completion,
    write_response,
)
from fake_openai import CLOSE, FakeOpenAI, stream
from helpers import running


@pytest.fixture
async def server() -> AsyncIterator[FakeOpenAI]:
    s = FakeOpenAI()
    await s.start()
    try:
        yield s
    finally:
        await s.close()


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


def tool_round(body: dict[str, Any]) -> list[Any]:
    """Reasoning, text, then two tool calls interleaved by index, their
    arguments split (the second's before its name arrives in full)."""
    return [
        chunk({"role": "assistant", "reasoning_content": "The user wants "}), 0.01,
        chunk({"reasoning_content": "two lookups."}),
        chunk({"content": "Looking "}), chunk({"content": "up."}),
        chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "echo", "arguments": ""}}]}),
        chunk({"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "echo", "arguments": '{"te'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"text": "one"}'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": 'xt": "two"}'}}]}),
        chunk(finish="tool_calls"),
    ]


def answer_round(body: dict[str, Any]) -> list[Any]:
    return [chunk({"reasoning": "Both echoed."}), chunk({"content": "Got one "}), 0.01,
            chunk({"content": "and two."}), chunk(finish="stop")]


@pytest.mark.parametrize("objects", [False, True], ids=["dicts", "objects"])
async def test_chat_completions_with_tool_calls(dsn: str, client: Client, server: FakeOpenAI, objects: bool) -> None:
    server.scripts = [tool_round, answer_round]
    results = []

    async def handle(job: Job) -> None:
        messages = chat_messages(job, system="Be brief.")
        while True:
            body = {"model": "m", "messages": messages}
            result = await write_chat_completion(job.reply, stream(server.base_url, "/chat/completions", body, objects=objects))
            results.append(result)
            if not result.tool_calls:
                return
            messages.append(result.assistant_message())
            for call in result.tool_calls:
                call.complete(call.input["text"])
                messages.append(tool_message(call, call.input["text"]))

    async with running(dsn, handle):
        prompt = await client.send("Echo one and two")
        assert (await client.settled(prompt))["status"] == "completed"

    blocks = await client.blocks(prompt)
    assert [(b["type"], b["content"]) for b in blocks] == [
        ("reasoning", "The user wants two lookups."), ("text", "Looking up."),
        ("tool_use", '{"text": "one"}'), ("tool_use", '{"text": "two"}'),
        ("tool_result", "one"), ("tool_result", "two"),
        ("reasoning", "Both echoed."), ("text", "Got one and two."),
    ]
    assert blocks[2]["toolCall"] == {"name": "echo", "input": {"text": "one"}, "status": "completed", "output": "one", "error": None}
    assert blocks[3]["metadata"]["callId"] == "call_b"
    assert results[0].finish_reason == "tool_calls" and results[1].finish_reason == "stop"
    # The second request carried the model's turn and both results.
    second = server.requests[1]["messages"]
    assert second[0] == {"role": "system", "content": "Be brief."}
    assert second[1] == {"role": "user", "content": "Echo one and two"}
    assert second[2]["tool_calls"][1] == {"id": "call_b", "type": "function", "function": {"name": "echo", "arguments": '{"text": "two"}'}}
    assert second[3:] == [{"role": "tool", "tool_call_id": "call_a", "content": "one"},
                          {"role": "tool", "tool_call_id": "call_b", "content": "two"}]


@pytest.mark.parametrize("objects", [False, True], ids=["dicts", "objects"])
async def test_chat_stream_error_fails_prompt_with_its_text(dsn: str, client: Client, server: FakeOpenAI, objects: bool) -> None:
    server.scripts = [lambda body: [chunk({"content": "Partial "}), chunk({"content": "answer"}), 0.05,
                                    {"error": {"message": "upstream overloaded", "type": "server_error"}}]]

    async def handle(job: Job) -> None:
        await write_chat_completion(job.reply, stream(server.base_url, "/chat/completions", {"messages": chat_messages(job)}, objects=objects))

    async with running(dsn, handle):
        prompt = await client.send("hi")
        settled = await client.settled(prompt)

    assert settled["status"] == "failed" and settled["error"] == "upstream overloaded"
    assert [(b["type"], b["status"], b["content"]) for b in await client.blocks(prompt)] == [("text", "completed", "Partial answer")]


async def test_chat_error_chunk_and_cut_stream_raise_model_error(dsn: str, client: Client, server: FakeOpenAI) -> None:
    """An error object among the chunks (a client that does not raise for
    it), and a stream that stops without a finish_reason."""
    async def chunks_with_error() -> AsyncIterator[Any]:
        yield chunk({"content": "x"})
        yield {"error": {"message": "rate limited", "code": "rate_limit_exceeded"}}

    server.scripts = [lambda body: [chunk({"content": "cut "}), CLOSE]]
    errors: list[str] = []

    async def handle(job: Job) -> None:
        with pytest.raises(ModelError) as first:
            await write_chat_completion(job.reply, chunks_with_error())
        errors.append(str(first.value))
        await write_chat_completion(job.reply, stream(server.base_url, "/chat/completions", {}, objects=False))

    async with running(dsn, handle):
        prompt = await client.send("hi")
        settled = await client.settled(prompt)

    assert errors == ["rate limited (rate_limit_exceeded)"]
    assert settled["status"] == "failed" and settled["error"] == "the stream ended before the answer finished"
    assert [b["content"] for b in await client.blocks(prompt)] == ["xcut "]


def responses_round(body: dict[str, Any]) -> list[Any]:
    call = {"type": "function_call", "id": "fc_1", "call_id": "call_r", "name": "echo", "arguments": ""}
    return [
        {"type": "response.created", "response": {"id": "resp_1", "status": "in_progress"}},
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1"}},
        {"type": "response.reasoning_summary_text.delta", "output_index": 0, "item_id": "rs_1", "summary_index": 0, "delta": "Need "},
        {"type": "response.reasoning_summary_text.delta", "output_index": 0, "item_id": "rs_1", "summary_index": 0, "delta": "a tool."},
        {"type": "response.output_item.done", "output_index": 0, "item": {"type": "reasoning", "id": "rs_1"}},
        {"type": "response.output_item.added", "output_index": 1, "item": call},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "item_id": "fc_1", "delta": '{"text":'},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "item_id": "fc_1", "delta": ' "hey"}'},
        {"type": "response.function_call_arguments.done", "output_index": 1, "item_id": "fc_1", "arguments": '{"text": "hey"}'},
        {"type": "response.output_item.done", "output_index": 1, "item": {**call, "arguments": '{"text": "hey"}'}},
        {"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}},
    ]


def responses_answer(body: dict[str, Any]) -> list[Any]:
    return [
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "msg_1", "role": "assistant"}},
        {"type": "response.output_text.delta", "output_index": 0, "item_id": "msg_1", "content_index": 0, "delta": "It said "},
        {"type": "response.output_text.delta", "output_index": 0, "item_id": "msg_1", "content_index": 0, "delta": "hey."},
        {"type": "response.output_item.done", "output_index": 0, "item": {"type": "message", "id": "msg_1"}},
        {"type": "response.completed", "response": {"id": "resp_2", "status": "completed"}},
    ]


@pytest.mark.parametrize("objects", [False, True], ids=["dicts", "objects"])
async def test_responses_with_a_function_call(dsn: str, client: Client, server: FakeOpenAI, objects: bool) -> None:
    server.scripts = [responses_round, responses_answer]
    ids = []

    async def handle(job: Job) -> None:
        body: dict[str, Any] = {"model": "m", "input": responses_input(job)}
        while True:
            result = await write_response(job.reply, stream(server.base_url, "/responses", body, objects=objects))
            ids.append(result.response_id)
            if not result.tool_calls:
                return
            outputs = []
            for call in result.tool_calls:
                call.complete(call.input["text"])
                outputs.append(function_call_output(call, call.input["text"]))
            body = {"model": "m", "previous_response_id": result.response_id, "input": outputs}

    async with running(dsn, handle):
        prompt = await client.send("Echo hey")
        assert (await client.settled(prompt))["status"] == "completed"

    blocks = await client.blocks(prompt)
    assert [(b["type"], b["content"]) for b in blocks] == [
        ("reasoning", "Need a tool."), ("tool_use", '{"text": "hey"}'), ("tool_result", "hey"), ("text", "It said hey.")]
    assert blocks[1]["toolCall"]["input"] == {"text": "hey"} and blocks[1]["metadata"]["callId"] == "call_r"
    assert ids == ["resp_1", "resp_2"]
    assert server.requests[0]["input"] == [{"role": "user", "content": "Echo hey"}]
    assert server.requests[1]["input"] == [{"type": "function_call_output", "call_id": "call_r", "output": "hey"}]


@pytest.mark.parametrize("failure", ["response.failed", "error"])
@pytest.mark.parametrize("objects", [False, True], ids=["dicts", "objects"])
async def test_responses_failure_fails_prompt_with_the_model_error(
        dsn: str, client: Client, server: FakeOpenAI, objects: bool, failure: str) -> None:
    last = ({"type": "response.failed", "response": {"id": "r", "status": "failed",
                                                     "error": {"code": "server_error", "message": "The model crashed"}}}
            if failure == "response.failed" else
            {"type": "error", "code": "server_error", "message": "The model crashed", "param": None})
    server.scripts = [lambda body: [
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "message", "id": "m"}},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "Half an "},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "answer"}, 0.05, last]]

    async def handle(job: Job) -> None:
        await write_response(job.reply, stream(server.base_url, "/responses", {}, objects=objects))

    async with running(dsn, handle):
        prompt = await client.send("hi")
        settled = await client.settled(prompt)

    assert settled["status"] == "failed" and settled["error"] == "The model crashed (server_error)"
    assert [b["content"] for b in await client.blocks(prompt)] == ["Half an answer"]


async def test_responses_structured_output(dsn: str, client: Client, server: FakeOpenAI) -> None:
    server.scripts = [lambda body: [
        {"type": "response.output_text.delta", "output_index": 0, "delta": '{"answer": '},
        {"type": "response.output_text.delta", "output_index": 0, "delta": "42}"},
        {"type": "response.completed", "response": {"id": "r", "status": "completed"}}]]

    async def handle(job: Job) -> None:
        await write_response(job.reply, stream(server.base_url, "/responses", {}, objects=True), structured=True)

    async with running(dsn, handle):
        prompt = await client.send("hi")
        assert (await client.settled(prompt))["status"] == "completed"
    assert [(b["type"], b["content"]) for b in await client.blocks(prompt)] == [("structured", '{"answer": 42}')]
