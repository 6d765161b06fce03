"""Pauses end to end through PostgreSQL: a tool call asks for input, the
prompt is parked holding nothing, the answer (in SQL, as the client's
convo.answer_input) queues it again, and a worker resumes it in the same
assistant message; a cancel while it waits; bad requests."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from conftest import Client, eventually
from convo_worker import InputRequest, Job, ToolCall
from convo_worker.openai import chat_messages
from helpers import running


class Agent:
    """A handler that plays an agent loop around a tool needing a person:
    the first run says something and calls the tool, asking for input of
    ``kind``; a resumed run acts on the answer and goes on. It records the
    jobs it was given and every run of the tool."""

    def __init__(self, kind: str = "approval", request: dict[str, Any] | None = None) -> None:
        self.kind = kind
        self.request = request if request is not None else {"message": "Delete notes.txt?"}
        self.jobs: list[Job] = []
        self.tool_runs: list[Any] = []
        self.told: list[str] = []

    def delete_file(self, arguments: Any) -> str:
        self.tool_runs.append(arguments)
        return f"deleted {arguments['path']}"

    async def __call__(self, job: Job) -> None:
        self.jobs.append(job)
        if job.last_user_text == "next":
            job.reply.text("served")
            return
        if not job.resumed:
            job.reply.text("I will delete it.")
            call = job.reply.tool_call("delete_file", {"path": "notes.txt"}, call_id="call_del")
            call.request_input(self.kind, self.request)  # type: ignore[arg-type]
            # Whatever is written meanwhile, the call's start is held back
            # for the batch that parks the prompt.
            await job.reply.flush()
            return  # the runtime parks the prompt
        for inp in job.answered:
            told = await inp.resolve(lambda inp=inp: self.delete_file(inp.input))
            self.told.append(told)
        job.reply.text(f"Outcome: {self.told[-1]}")


async def waiting(client: Client, prompt: str) -> dict[str, Any]:
    """Waits until the prompt is parked: queued, waiting, held by nobody."""

    async def check() -> dict[str, Any] | None:
        # As text: a running prompt held under its worker's process lease
        # has lease 'infinity', which Python's datetime cannot hold.
        status, is_waiting, worker, lease = await client.one(
            "SELECT status, waiting, worker, lease_expires_at::text FROM convo.prompts WHERE id = %s", prompt)
        if status == "queued" and is_waiting:
            return {"worker": worker, "lease": lease}
        return None

    return await eventually(f"prompt {prompt} to wait for input", check)


async def request_of(client: Client, prompt: str) -> tuple[str, str, dict[str, Any], str]:
    """The prompt's one input request: its tool call, kind, request and status."""
    rows = await client.all(
        "SELECT tool_call_id::text, kind, request, status FROM convo.input_requests WHERE prompt_id = %s", prompt)
    assert len(rows) == 1, rows
    return rows[0]


async def answer(client: Client, tool_call_id: str, value: dict[str, Any]) -> None:
    await client.one("SELECT 1 FROM convo.answer_input('local', %s, %s::jsonb)", tool_call_id, json.dumps(value))


async def check_parked(client: Client, prompt: str, recorder: Any) -> str:
    """Asserts what a parked prompt must be, and returns its tool call id:
    held by no worker and no lease, its call started with a pending
    request, written with wait_prompt in one transaction, the run's
    outcome waiting."""
    held = await waiting(client, prompt)
    assert held == {"worker": None, "lease": None}
    await eventually("the run's result", lambda: asyncio.sleep(0, recorder.results.get(prompt)))
    assert recorder.results[prompt].outcome == "waiting", recorder.results[prompt]
    tool_call, kind, _, status = await request_of(client, prompt)
    assert status == "pending"
    assert (await client.one("SELECT status FROM convo.tool_calls WHERE id = %s", tool_call))[0] == "started"
    # The call's start, its request and the park committed together, as
    # the Go runtime writes them: no answer could come before the park,
    # and no client saw the call started without its request.
    rows = await client.all(
        """SELECT kind, xmin::text FROM convo.events WHERE prompt_id = %s
              AND kind IN ('toolCallStarted', 'inputRequested', 'promptWaiting') ORDER BY seq""", prompt)
    assert [r[0] for r in rows] == ["toolCallStarted", "inputRequested", "promptWaiting"]
    assert len({r[1] for r in rows}) == 1, rows
    return tool_call


def shape(blocks: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    out = []
    for b in blocks:
        call = b.get("toolCall")
        out.append((b["type"], b["status"], b["content"]) + (
            (call["name"], call["status"], call["output"], call["error"]) if call else ()))
    return out


async def test_approved_call_runs_the_tool_and_the_reply_goes_on(dsn: str, client: Client) -> None:
    agent = Agent()
    async with running(dsn, agent, slots=1) as (_, recorder):
        prompt = await client.send("delete notes.txt")
        tool_call = await check_parked(client, prompt, recorder)
        assert (await request_of(client, prompt))[1:3] == ("approval", {"message": "Delete notes.txt?"})
        # The slot is free while it waits: another prompt runs on the only one.
        other = await client.send("next")
        assert (await client.settled(other))["status"] == "completed"
        assert agent.tool_runs == []

        await answer(client, tool_call, {"approved": True})
        assert (await client.settled(prompt))["status"] == "completed"

    assert agent.tool_runs == [{"path": "notes.txt"}]
    resumed = agent.jobs[-1]
    assert resumed.resumed and resumed.prompt_id == prompt and resumed.attempts == 1
    assert [(b.block_type, b.content) for b in resumed.reply_so_far] == [
        ("text", "I will delete it."), ("tool_use", '{"path":"notes.txt"}')]
    [inp] = resumed.inputs
    assert isinstance(inp, InputRequest)
    assert (inp.tool_call_id, inp.call_id, inp.name, inp.input, inp.kind, inp.status, inp.answer) == (
        tool_call, "call_del", "delete_file", {"path": "notes.txt"}, "approval", "answered", {"approved": True})
    assert inp.approved and inp.denial is None and not inp.actionable  # acted on
    assert agent.told == ["deleted notes.txt"]

    blocks = await client.blocks(prompt)
    assert shape(blocks) == [
        ("text", "completed", "I will delete it."),
        ("tool_use", "completed", '{"path":"notes.txt"}', "delete_file", "completed", "deleted notes.txt", None),
        ("tool_result", "completed", "deleted notes.txt"),
        ("text", "completed", "Outcome: deleted notes.txt"),
    ]
    assert blocks[2]["metadata"] == {"toolCallId": tool_call, "callId": "call_del", "tool": "delete_file",
                                     "outputBytes": len("deleted notes.txt"), "inputKind": "approval"}
    # One assistant message, one prompt.
    assert (await client.one(
        "SELECT count(DISTINCT message_id) FROM convo.blocks WHERE prompt_id = %s", prompt))[0] == 1
    # The model's next request: the user's message, the reply's turn with
    # its call, answered by the tool's output.
    assert chat_messages(resumed) == [
        {"role": "user", "content": "delete notes.txt"},
        {"role": "assistant", "content": "I will delete it.", "tool_calls": [
            {"id": tool_call, "type": "function", "function": {"name": "delete_file", "arguments": '{"path": "notes.txt"}'}}]},
        {"role": "tool", "tool_call_id": tool_call, "content": "deleted notes.txt"},
    ]


async def test_denied_call_fails_with_the_reason_and_the_reply_goes_on(dsn: str, client: Client) -> None:
    agent = Agent()
    async with running(dsn, agent, slots=1) as (_, recorder):
        prompt = await client.send("delete notes.txt")
        tool_call = await check_parked(client, prompt, recorder)
        await answer(client, tool_call, {"approved": False, "reason": "not that file"})
        assert (await client.settled(prompt))["status"] == "completed"

    assert agent.tool_runs == []  # never run without approval
    assert agent.told == ["error: denied by the user: not that file"]
    inp = agent.jobs[-1].inputs[0]
    assert not inp.approved and inp.denial == "denied by the user: not that file"
    blocks = await client.blocks(prompt)
    assert shape(blocks) == [
        ("text", "completed", "I will delete it."),
        ("tool_use", "completed", '{"path":"notes.txt"}', "delete_file", "failed", "",
         "denied by the user: not that file"),
        ("tool_result", "completed", "error: denied by the user: not that file"),
        ("text", "completed", "Outcome: error: denied by the user: not that file"),
    ]
    assert blocks[2]["metadata"]["isError"] is True and blocks[2]["metadata"]["inputKind"] == "approval"
    assert [(m.role, m.text) for m in agent.jobs[-1].messages][-1] == (
        "tool", "error: denied by the user: not that file")


async def test_cancel_while_waiting(dsn: str, client: Client) -> None:
    agent = Agent()
    async with running(dsn, agent, slots=1) as (_, recorder):
        prompt = await client.send("delete notes.txt")
        tool_call = await check_parked(client, prompt, recorder)
        await client.cancel(prompt)
        assert (await client.prompt(prompt))["status"] == "cancelled"
        # The worker is free and serves the next prompt; the cancelled one
        # is never claimed again.
        other = await client.send("next")
        assert (await client.settled(other))["status"] == "completed"

    assert [j.prompt_id for j in agent.jobs] == [prompt, other]
    assert agent.tool_runs == []
    assert (await request_of(client, prompt))[3] == "cancelled"
    status, error = await client.one("SELECT status, error FROM convo.tool_calls WHERE id = %s", tool_call)
    assert status == "failed" and error


async def test_resumed_by_another_worker(dsn: str, client: Client) -> None:
    """The worker that parked the prompt is gone (stopped, as after a
    restart); a worker of another name resumes it from the database alone."""
    first, second = Agent(), Agent()
    async with running(dsn, first, slots=1, worker_id="worker-a") as (_, recorder):
        prompt = await client.send("delete notes.txt")
        tool_call = await check_parked(client, prompt, recorder)
    await answer(client, tool_call, {"approved": True})
    async with running(dsn, second, slots=1, worker_id="worker-b"):
        assert (await client.settled(prompt))["status"] == "completed"

    assert [j.resumed for j in first.jobs] == [False]
    assert [j.resumed for j in second.jobs] == [True]
    assert first.tool_runs == [] and second.tool_runs == [{"path": "notes.txt"}]
    assert second.jobs[0].worker_id == "worker-b"
    assert [b["type"] for b in await client.blocks(prompt)] == ["text", "tool_use", "tool_result", "text"]
    assert (await client.one(
        "SELECT count(*) FROM convo.events WHERE prompt_id = %s AND kind = 'promptStarted'", prompt))[0] == 2


async def test_question_answered(dsn: str, client: Client) -> None:
    agent = Agent("question", {"question": "Which file?", "choices": ["notes.txt", "todo.txt"]})
    async with running(dsn, agent, slots=1) as (_, recorder):
        prompt = await client.send("delete a file")
        tool_call = await check_parked(client, prompt, recorder)
        assert (await request_of(client, prompt))[1] == "question"
        await answer(client, tool_call, {"answer": "todo.txt"})
        assert (await client.settled(prompt))["status"] == "completed"

    assert agent.tool_runs == []  # a question's answer is the output
    blocks = await client.blocks(prompt)
    assert shape(blocks)[1:] == [
        ("tool_use", "completed", '{"path":"notes.txt"}', "delete_file", "completed", "todo.txt", None),
        ("tool_result", "completed", "todo.txt"),
        ("text", "completed", "Outcome: todo.txt"),
    ]
    assert blocks[2]["metadata"]["inputKind"] == "question"


async def test_bad_requests(dsn: str, client: Client) -> None:
    """Bad input to request_input raises, naming what is wrong, and writes
    nothing; a request shape only the database checks fails the prompt
    with its message, naming the field."""
    errors: list[str] = []

    async def handle(job: Job) -> None:
        call: ToolCall = job.reply.tool_call("delete_file", {"path": "x"})
        for bad in (lambda: call.request_input("permission", {}),  # type: ignore[arg-type]
                    lambda: call.request_input("approval", ["not", "an", "object"])):  # type: ignore[arg-type]
            with pytest.raises((ValueError, TypeError)) as err:
                bad()
            errors.append(str(err.value))
        done = job.reply.tool_call("echo", {"text": "hi"})
        done.complete("hi")
        with pytest.raises(ValueError) as err:
            done.request_input("approval")
        errors.append(str(err.value))
        call.request_input("question", {"choices": ["a"]})  # no question: refused by convo.request_input
        with pytest.raises(ValueError):
            call.complete("no")  # it waits for input
        with pytest.raises(ValueError):
            call.request_input("approval")  # asks once

    async with running(dsn, handle) as (_, recorder):
        prompt = await client.send("go")
        settled = await client.settled(prompt)
        await eventually("the run's result", lambda: asyncio.sleep(0, recorder.results.get(prompt)))

    assert "kind must be one of approval, client_tool, question, got 'permission'" in errors[0]
    assert "request must be a dict" in errors[1]
    assert "has completed" in errors[2]
    assert settled["status"] == "failed" and "question" in settled["error"], settled
    assert recorder.results[prompt].outcome == "failed"
    assert await client.all("SELECT 1 FROM convo.input_requests WHERE prompt_id = %s", prompt) == []


async def test_a_handler_that_fails_after_asking_fails_the_prompt(dsn: str, client: Client) -> None:
    """The requests are dropped (the prompt does not wait); the call that
    asked is kept, recorded, and failed with the prompt."""

    async def handle(job: Job) -> None:
        job.reply.text("Asking.")
        job.reply.tool_call("delete_file", {"path": "x"}, call_id="call_x").request_input("approval")
        raise RuntimeError("the model broke")

    async with running(dsn, handle) as (_, recorder):
        prompt = await client.send("go")
        settled = await client.settled(prompt)
        await eventually("the run's result", lambda: asyncio.sleep(0, recorder.results.get(prompt)))

    assert settled["status"] == "failed" and settled["error"] == "the model broke"
    assert recorder.results[prompt].outcome == "failed"
    assert await client.all("SELECT 1 FROM convo.input_requests WHERE prompt_id = %s", prompt) == []
    blocks = await client.blocks(prompt)
    assert [(b["type"], b["content"], (b.get("toolCall") or {}).get("status")) for b in blocks] == [
        ("text", "Asking.", None), ("tool_use", '{"path":"x"}', "failed")]


@pytest.mark.parametrize("kind,value,expired,told,call_status", [
    ("client_tool", {"output": '{"lat": 1}'}, False, '{"lat": 1}', "completed"),
    ("client_tool", {"error": "no GPS"}, False, "error: no GPS", "failed"),
    ("client_tool", None, True, "error: the request expired", "failed"),
    ("approval", None, True, "error: denied: the request expired", "failed"),
])
async def test_client_tool_answers_and_expiry(dsn: str, client: Client, kind: str, value: dict[str, Any] | None,
                                              expired: bool, told: str, call_status: str) -> None:
    agent = Agent(kind, {})
    async with running(dsn, agent, slots=1) as (_, recorder):
        prompt = await client.send("locate")
        tool_call = await check_parked(client, prompt, recorder)
        if expired:
            # The request's time ran out: the server answers it with a denial.
            await client.one("UPDATE convo.input_requests SET expires_at = now() - interval '1 second' "
                             "WHERE tool_call_id = %s RETURNING 1", tool_call)
            await client.one("SELECT convo.expire_leases()")
        else:
            assert value is not None
            await answer(client, tool_call, value)
        assert (await client.settled(prompt))["status"] == "completed"

    assert agent.tool_runs == []
    assert agent.told == [told]
    assert agent.jobs[-1].inputs[0].status == ("expired" if expired else "answered")
    blocks = await client.blocks(prompt)
    assert blocks[1]["toolCall"]["status"] == call_status
    assert (blocks[2]["type"], blocks[2]["content"], blocks[2]["metadata"]["inputKind"]) == ("tool_result", told, kind)
