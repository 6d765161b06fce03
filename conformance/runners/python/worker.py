#!/usr/bin/env python3
"""The conformance runner of convo-worker (Python): runs the runtime as a
worker is deployed, with the scripted model and the echo and guarded_echo
tools of conformance/README.md, until SIGTERM (then it drains and exits 0).

The scripted model is played straight into the reply writer; where the Go
runtime runs the tool loop itself, this runner plays that part, as agent
code using the SDK does: it runs echo, completes the call, and plays the
next round. A call of guarded_echo asks for the user's approval and the
handler returns (the runtime parks the prompt); the claim that resumes it
runs the tool if approved (or fails the call if denied) and plays the
round after the one that paused."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from typing import Any

from convo_worker import Job, Settings, ToolCall, Worker


class ScriptError(Exception):
    """The model's stream broke: the script's {"error": …} step."""


def setting(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"{name} must be an integer, got {raw!r}") from None


#: The tools that wait for the user's approval before they run.
NEEDS_APPROVAL = {"guarded_echo"}


def echo_output(arguments: Any) -> str:
    """What echo (and guarded_echo, once approved) returns: the input's
    text field."""
    text = arguments.get("text") if isinstance(arguments, dict) else None
    return text if isinstance(text, str) else ""


def run_tool(call: ToolCall) -> None:
    """Runs a call that needs nobody, or asks for the approval of one that
    does (the call then waits, and the prompt with it)."""
    if call.status == "failed":
        return  # arguments that were not JSON: the call failed already
    if call.name in NEEDS_APPROVAL:
        call.request_input("approval")
    elif call.name == "echo":
        call.complete(echo_output(call.input))
    else:
        call.fail(f"there is no tool called {call.name!r}")


async def resume(job: Job) -> int:
    """Acts on the answers of a resumed prompt (an approved call runs, a
    denied one fails with the reason) and returns the round to play next:
    the assistant's turns since the user's message, as the Go runner
    counts them, so that any worker resumes where the pause left off."""
    for inp in job.answered:
        await inp.resolve(lambda inp=inp: echo_output(inp.input))
    messages = job.messages
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    return sum(1 for m in messages[last_user + 1 :] if m.role == "assistant")


def acknowledge(job: Job) -> str:
    """The attachments step's text, as every runner writes it: for each
    file of the user's message, in order, "You attached <filename> (<media
    type without parameters>, <size> bytes)", then for a text/* file
    `; its first line: "<line>"` (its bytes up to the first newline,
    within the first 64 KiB), then "."; the lines joined by newlines."""
    lines = []
    for f in job.last_user_files:
        line = f"You attached {f.filename} ({f.media_type.split(';')[0].strip()}, {f.size} bytes)"
        if f.media_type.startswith("text/"):
            if f.data is None:
                raise ScriptError(f"the bytes of {f.filename} were not read")
            first = f.data[: 64 << 10].split(b"\n", 1)[0].decode("utf-8", errors="replace").removesuffix("\r")
            line += f'; its first line: "{first}"'
        lines.append(line + ".")
    return "\n".join(lines)


async def play(job: Job) -> None:
    """Plays the script of the user's message, round by round."""
    try:
        script = json.loads(job.last_user_text)
        rounds: list[list[dict[str, Any]]] = script["rounds"]
    except (ValueError, KeyError, TypeError) as err:
        raise ScriptError(f"the user's message is not a conformance script: {err}") from None
    first = await resume(job) if job.resumed else 0
    if first >= len(rounds):
        raise ScriptError(f"the model was called for round {first}, the script has {len(rounds)}")
    for steps in rounds[first:]:
        calls: list[ToolCall] = []
        for step in steps:
            if "text" in step:
                job.reply.text(step["text"])
            elif "reasoning" in step:
                job.reply.reasoning(step["reasoning"])
            elif "json" in step:
                job.reply.structured(step["json"])
            elif "toolCall" in step:
                tc = step["toolCall"]
                calls.append(job.reply.tool_call(tc["name"], tc["input"], call_id=tc["id"]))
            elif "sleepMs" in step:
                await asyncio.sleep(step["sleepMs"] / 1000)
            elif step.get("hang"):
                await asyncio.Event().wait()  # until the runtime cancels the reply
            elif "error" in step:
                raise ScriptError(step["error"])
            elif step.get("attachments") is True:
                job.reply.text(acknowledge(job))
            else:
                raise ScriptError(f"unknown step {json.dumps(step)}")
        job.reply.end_block()
        if not calls:
            return
        for call in sorted(calls, key=lambda c: c.name in NEEDS_APPROVAL):  # the calls that need nobody first
            run_tool(call)
        if any(c.input_kind is not None for c in calls):
            return  # the runtime parks the prompt until the user answers


async def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    url = os.environ.get("DATABASE_URL")
    if not url:
        raise SystemExit("DATABASE_URL is not set")
    settings = Settings(
        worker_id=os.environ.get("CONVO_WORKER_ID") or f"conformance-python-{os.getpid()}",
        slots=setting("CONVO_WORKER_SLOTS", 1),
        lease_seconds=setting("CONVO_LEASE_SECONDS", 30),
        batch_interval=setting("CONVO_BATCH_INTERVAL_MS", 20) / 1000,
        drain_timeout=setting("CONVO_DRAIN_TIMEOUT_MS", 20_000) / 1000,
    )
    worker = Worker(url, play, settings)
    await worker.start()
    print("ready", flush=True)
    await worker.serve()


if __name__ == "__main__":
    asyncio.run(main())
