"""The client tools a prompt declares (its model configuration's ``tools``,
as an OpenAI Responses request's function tools are), through a worker into
PostgreSQL: offered to the model beside the handler's own tools
(with_declared_tools), a call of one asks the client for its output and
parks the prompt, and the client's output completes it when the prompt
resumes; a declared name that is one of the handler's tools, or a
declaration that is none, fails the reply naming it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from conftest import Client
from convo_worker import Job
from convo_worker.declared import ToolDeclaration, declared_tools, is_declared, with_declared_tools
from convo_worker.openai import chat_messages, write_chat_completion
from helpers import running
from test_pause import answer, check_parked, request_of

ECHO = {"type": "function", "function": {"name": "echo", "description": "Echoes its text.",
                                         "parameters": {"type": "object", "properties": {"text": {"type": "string"}}}}}
WEATHER = {"name": "get_weather", "description": "The weather in a city.",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]}


async def calls_weather() -> AsyncIterator[dict[str, Any]]:
    """A Chat Completions stream in which the model calls get_weather."""
    yield chunk({"content": "Let me look."})
    yield chunk({"tool_calls": [{"index": 0, "id": "call_w", "type": "function",
                                 "function": {"name": "get_weather", "arguments": '{"city": '}}]})
    yield chunk({"tool_calls": [{"index": 0, "function": {"arguments": '"Lima"}'}}]})
    yield chunk(finish="tool_calls")


class Agent:
    """Offers its echo tool and the declared ones; the first run's model
    calls get_weather, which the agent asks the client to run when the
    prompt declares it; a resumed run completes the call with the answer."""

    def __init__(self) -> None:
        self.offered: list[list[dict[str, Any]]] = []
        self.jobs: list[Job] = []
        self.told: list[str] = []

    async def __call__(self, job: Job) -> None:
        self.jobs.append(job)
        self.offered.append(with_declared_tools(job, [ECHO]))
        if job.resumed:
            for inp in job.answered:
                self.told.append(await inp.resolve())
            job.reply.text(f"It is {self.told[-1]}.")
            return
        result = await write_chat_completion(job.reply, calls_weather())
        for call in result.tool_calls:
            if is_declared(job, call.name):
                call.request_input("client_tool", {})
            else:
                call.fail(f"no tool {call.name}")


async def test_declared_tool_is_offered_and_its_call_waits_for_the_client(dsn: str, client: Client) -> None:
    agent = Agent()
    async with running(dsn, agent, slots=1) as (_, recorder):
        prompt = await client.send("weather in Lima?", config={"tools": [WEATHER]})
        tool_call = await check_parked(client, prompt, recorder)
        assert (await request_of(client, prompt))[1:4] == ("client_tool", {}, "pending")
        await answer(client, tool_call, {"output": "warm, 24 C"})
        assert (await client.settled(prompt))["status"] == "completed"

    want = [ECHO, {"type": "function", "function": WEATHER}]
    assert agent.offered == [want, want]
    assert agent.told == ["warm, 24 C"]
    blocks = await client.blocks(prompt)
    assert [(b["type"], b.get("toolCall", {}).get("name"), b.get("toolCall", {}).get("status"),
             b.get("toolCall", {}).get("output")) for b in blocks] == [
        ("text", None, None, None),
        ("tool_use", "get_weather", "completed", "warm, 24 C"),
        ("tool_result", None, None, None),
        ("text", None, None, None),
    ]
    assert blocks[2]["metadata"]["inputKind"] == "client_tool" and blocks[3]["content"] == "It is warm, 24 C."
    # The model's next request answers the call with the client's output.
    assert chat_messages(agent.jobs[-1])[-1] == {"role": "tool", "tool_call_id": tool_call, "content": "warm, 24 C"}


@pytest.mark.parametrize("tools,error", [
    ([{"name": "echo"}],
     'the prompt declares a client tool "echo", but this worker has a tool of that name: rename the declared tool'),
    ([WEATHER, WEATHER], "the prompt's declared tool 1: tool get_weather is declared twice"),
    ([{"name": "get weather"}], "the prompt's declared tool 0: tool name 'get weather': want 1 to 64 letters, digits, _ or -"),
    ([{"name": "get_weather", "parameters": {"type": "string"}}],
     """the prompt's declared tool 0: tool get_weather: parameters must be the schema of an object ("type": "object")"""),
    ({"name": "get_weather"}, "the prompt's declared tools (model_config.tools) must be a list"),
])
async def test_bad_declaration_fails_the_reply_naming_it(dsn: str, client: Client, tools: Any, error: str) -> None:
    runs: list[str] = []

    async def handle(job: Job) -> None:
        with_declared_tools(job, [ECHO])  # before the model runs
        runs.append("the model")
        job.reply.text("never here")

    async with running(dsn, handle, slots=1):
        prompt = await client.send("hi", config={"tools": tools})
        settled = await client.settled(prompt)
    assert settled["status"] == "failed" and settled["error"] == error, settled
    assert runs == [] and await client.blocks(prompt) == []
    assert (await client.all("SELECT 1 FROM convo.input_requests WHERE prompt_id = %s", prompt)) == []


class _Job:
    def __init__(self, config: dict[str, Any]) -> None:
        self.model_config = config


def test_shapes_of_the_offered_tools() -> None:
    job: Any = _Job({"tools": [WEATHER, {"name": "ping"}]})
    assert declared_tools(job) == [ToolDeclaration("get_weather", WEATHER["description"], WEATHER["parameters"]),
                                   ToolDeclaration("ping")]
    assert with_declared_tools(job, api="responses") == [
        {"type": "function", **WEATHER},
        {"type": "function", "name": "ping", "parameters": {"type": "object", "properties": {}}},
    ]
    # A Responses-shaped tool of the handler's collides by name as well.
    with pytest.raises(ValueError, match='client tool "ping"'):
        with_declared_tools(job, [{"type": "function", "name": "ping"}], api="responses")
    none: Any = _Job({})
    own = [ECHO]
    assert with_declared_tools(none, own) == own and not is_declared(none, "echo")
    assert json.dumps(with_declared_tools(job)[1]) == '{"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}'
