"""A TCP proxy in front of PostgreSQL that breaks connections on cue: the
faults a worker must survive without losing or doubling text."""

from __future__ import annotations

import asyncio
import contextlib

from psycopg.conninfo import conninfo_to_dict, make_conninfo

# PostgreSQL's ReadyForQuery message (idle): sent once a call's
# transaction has committed.
READY_FOR_QUERY = b"Z\x00\x00\x00\x05I"


class _Pipe:
    def __init__(self, proxy: Proxy, client: asyncio.StreamWriter, server: asyncio.StreamWriter) -> None:
        self.proxy = proxy
        self.client = client
        self.server = server
        self.cutting = False  # swallowing the answer to a call, to cut after its commit
        self.held = b""
        self.listens = False  # it sent LISTEN
        self.frozen = False  # bytes are dropped both ways, the connection kept open

    def close(self) -> None:
        for w in (self.client, self.server):
            with contextlib.suppress(Exception):
                w.transport.abort()


class Proxy:
    """Listens on 127.0.0.1 and forwards to the server of target_dsn.

    ``cut_after_commit(marker)``: the next call whose bytes hold marker
    reaches PostgreSQL and commits, and its connection is cut before the
    answer gets back. ``outage(seconds)``: every connection is cut and new
    ones are refused for that long, as a database restart does.
    ``freeze_listeners()``: the connections that sent LISTEN drop every
    byte both ways and stay open, as on a network that loses packets
    without a reset (TCP notices after hours)."""

    def __init__(self, target_dsn: str) -> None:
        self.target = conninfo_to_dict(target_dsn)
        self._server: asyncio.base_events.Server | None = None
        self._pipes: set[_Pipe] = set()
        self._marker: bytes | None = None
        self._refusing = False
        self.cuts = 0
        self.connections = 0

    @property
    def dsn(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return make_conninfo(**{**self.target, "host": "127.0.0.1", "port": str(port), "hostaddr": "127.0.0.1"})

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)

    async def close(self) -> None:
        for pipe in list(self._pipes):
            pipe.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def cut_after_commit(self, marker: str) -> None:
        self._marker = marker.encode()

    def freeze_listeners(self) -> None:
        for pipe in self._pipes:
            if pipe.listens:
                pipe.frozen = True

    async def outage(self, seconds: float) -> None:
        self._refusing = True
        for pipe in list(self._pipes):
            pipe.close()
        await asyncio.sleep(seconds)
        self._refusing = False

    async def _open_upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        host = str(self.target.get("host") or "127.0.0.1")
        port = int(self.target.get("port") or 5432)
        if host.startswith("/"):
            return await asyncio.open_unix_connection(f"{host}/.s.PGSQL.{port}")
        return await asyncio.open_connection(host, port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusing:
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await self._open_upstream()
        except OSError:
            writer.transport.abort()
            return
        self.connections += 1
        pipe = _Pipe(self, writer, up_writer)
        self._pipes.add(pipe)
        try:
            await asyncio.gather(self._to_server(pipe, reader), self._to_client(pipe, up_reader))
        finally:
            self._pipes.discard(pipe)
            pipe.close()

    async def _to_server(self, pipe: _Pipe, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(Exception):
            while data := await reader.read(65536):
                if pipe.frozen:
                    continue
                pipe.listens = pipe.listens or b"LISTEN" in data
                if self._marker is not None and self._marker in data:
                    self._marker = None
                    pipe.cutting = True
                pipe.server.write(data)
                await pipe.server.drain()
        pipe.close()

    async def _to_client(self, pipe: _Pipe, reader: asyncio.StreamReader) -> None:
        with contextlib.suppress(Exception):
            while data := await reader.read(65536):
                if pipe.frozen:
                    continue
                if pipe.cutting:
                    pipe.held += data
                    if READY_FOR_QUERY in pipe.held:
                        self.cuts += 1
                        break
                    continue
                pipe.client.write(data)
                await pipe.client.drain()
        pipe.close()
