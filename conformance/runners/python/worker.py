#!/usr/bin/env python3
"""The conformance runner of convo-worker (Python): runs the runtime as a
worker is deployed, with the scripted model and the echo tool of
conformance/README.md, until SIGTERM (then it drains and exits 0).

The scripted model is played straight into the reply writer; where the Go
runtime runs the tool loop itself, this runner plays that part, as agent
code using the SDK does: it runs echo, completes the call, and plays the
next round."""

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


def echo(call: ToolCall) -> None:
    """The suite's one tool: its output is the input's text field."""
    if call.status == "failed":
        return  # arguments that were not JSON: the call failed already
    if call.name != "echo":
        call.fail(f"there is no tool called {call.name!r}")
        return
    text = call.input.get("text") if isinstance(call.input, dict) else None
    call.complete(text if isinstance(text, str) else "")


async def play(job: Job) -> None:
    """Plays the script of the user's message, round by round."""
    try:
        script = json.loads(job.last_user_text)
        rounds: list[list[dict[str, Any]]] = script["rounds"]
    except (ValueError, KeyError, TypeError) as err:
        raise ScriptError(f"the user's message is not a conformance script: {err}") from None
    for steps in rounds:
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
            else:
                raise ScriptError(f"unknown step {json.dumps(step)}")
        job.reply.end_block()
        if not calls:
            return
        for call in calls:
            echo(call)


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
