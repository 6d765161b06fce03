"""A fake OpenAI-compatible server (asyncio, loopback only) that streams
SSE as the real one does, and a small client that reads it the way the
OpenAI Python SDK does: each event parsed from JSON, as a dict or as an
object with attributes; an event carrying ``error`` raises, like the SDK's
APIError."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

#: A step of a scripted stream: an event (a dict, sent as ``data:``), a
#: pause in seconds (a float), or CLOSE (the connection drops).
CLOSE = object()
Step = Any


@dataclass
class FakeOpenAI:
    """Serves POST /v1/chat/completions and /v1/responses: each request is
    answered with the next script of ``scripts`` (a function of the
    request's JSON body returning steps). Records every request body."""

    scripts: list[Callable[[dict[str, Any]], list[Step]]] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    _server: asyncio.base_events.Server | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1"

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)}
            body = json.loads(await reader.readexactly(int(headers.get("content-length", "0"))))
            self.requests.append({"path": path, **body})
            if method != "POST" or not self.scripts:
                writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            steps = self.scripts.pop(0)(body)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
            for step in steps:
                if step is CLOSE:
                    return
                if isinstance(step, float):
                    await asyncio.sleep(step)
                    continue
                event = f"event: {step['type']}\n" if path.endswith("/responses") and "type" in step else ""
                writer.write(f"{event}data: {json.dumps(step)}\n\n".encode())
                await writer.drain()
            if path.endswith("/chat/completions"):
                writer.write(b"data: [DONE]\n\n")
        finally:
            writer.close()


class APIError(Exception):
    """What the SDK raises for an error carried by the stream."""


def as_object(value: Any) -> Any:
    """JSON as attribute objects, the shape of the SDK's models."""
    if isinstance(value, dict):
        return SimpleNamespace(**{k: as_object(v) for k, v in value.items()})
    if isinstance(value, list):
        return [as_object(v) for v in value]
    return value


async def stream(base_url: str, path: str, body: dict[str, Any], *, objects: bool) -> AsyncIterator[Any]:
    """POSTs body with ``stream: true`` and yields the SSE events."""
    host_port = base_url.split("//", 1)[1].split("/", 1)[0]
    host, port = host_port.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        payload = json.dumps({**body, "stream": True}).encode()
        prefix = "/" + base_url.split("//", 1)[1].split("/", 1)[1]
        writer.write(
            f"POST {prefix}{path} HTTP/1.1\r\nHost: {host_port}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode() + payload)
        await writer.drain()
        status = await reader.readline()
        if b" 200 " not in status:
            raise APIError(f"HTTP {status.decode().strip()}")
        await reader.readuntil(b"\r\n\r\n")
        data: list[str] = []
        while line := await reader.readline():
            text = line.decode().rstrip("\n")
            if text.startswith("data: "):
                data.append(text[len("data: "):])
                continue
            if text or not data:
                continue
            raw, data = "\n".join(data), []
            if raw.startswith("[DONE]"):
                return
            event = json.loads(raw)
            if isinstance(event, dict) and event.get("error"):
                error = event["error"]
                raise APIError(error.get("message") if isinstance(error, dict) else str(error))
            yield as_object(event) if objects else event
    finally:
        writer.close()
