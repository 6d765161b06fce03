"""The trace context a prompt keeps (convo.prompt_trace), as the handler
sees it: Job.traceparent and Job.tracestate, for the app to continue the
send's trace with OpenTelemetry (not installable here, so not used)."""

from __future__ import annotations

import json

from conftest import Client
from convo_worker import Job
from helpers import running

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def send_traced(client: Client, text: str, trace_context: dict[str, str]) -> str:
    """Sends text as a request traced with trace_context would:
    convo.send_message keeps it with the prompt."""
    async with client.conn.transaction():
        await client.one("SELECT set_config('convo.trace_context', %s, true)", json.dumps(trace_context))
        return await client.send(text)


async def test_job_carries_the_stored_trace_context(dsn: str, client: Client) -> None:
    seen: dict[str, Job] = {}

    async def handle(job: Job) -> None:
        seen[job.prompt_id] = job
        job.reply.text("ok")

    async with running(dsn, handle):
        traced = await send_traced(client, "traced", {"traceparent": TRACEPARENT, "tracestate": "vendor=x"})
        only_parent = await send_traced(client, "no state", {"traceparent": TRACEPARENT})
        untraced = await client.send("untraced")
        for prompt in (traced, only_parent, untraced):
            assert (await client.settled(prompt))["status"] == "completed"

    assert (seen[traced].traceparent, seen[traced].tracestate) == (TRACEPARENT, "vendor=x")
    assert (seen[only_parent].traceparent, seen[only_parent].tracestate) == (TRACEPARENT, None)
    assert (seen[untraced].traceparent, seen[untraced].tracestate) == (None, None)
