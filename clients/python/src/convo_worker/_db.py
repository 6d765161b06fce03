"""Connections to PostgreSQL, and what its errors mean to a worker."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import psycopg
from psycopg import pq

log = logging.getLogger("convo_worker")

T = TypeVar("T")

# The SQLSTATEs of the SQL worker API (db/sqlstate in the repository).
NOT_FOUND = "CV001"
ILLEGAL_STATE = "CV002"
INVALID_ARGUMENT = "CV003"


def sqlstate_of(err: BaseException) -> str | None:
    """PostgreSQL's code for err, or None when it did not come from the
    server (a broken connection, a timeout)."""
    if isinstance(err, psycopg.Error):
        return err.diag.sqlstate
    return None


def message_of(err: BaseException) -> str:
    """err's message without psycopg's decoration."""
    if isinstance(err, psycopg.Error) and err.diag.message_primary:
        return err.diag.message_primary
    return str(err) or type(err).__name__


def retryable(err: BaseException) -> bool:
    """Whether a failed call may be sent again as it was: the connection
    failed or timed out (the call may or may not have committed; the
    worker API applies a batch once), or PostgreSQL refused the
    transaction for a reason of its own (a deadlock or serialization
    failure, a shutdown or restart, too many connections)."""
    state = sqlstate_of(err)
    if state is None:
        return isinstance(err, (psycopg.OperationalError, psycopg.InterfaceError, OSError, TimeoutError))
    if state == "57014":  # a statement cancelled by its timeout
        return False
    return state[:2] in ("40", "08", "53", "57")


async def connect(conninfo: str, worker_id: str, timeout: float) -> psycopg.AsyncConnection[Any]:
    """A connection in autocommit (each call of the worker API is its own
    transaction), with TCP keepalives so that a peer gone silent is
    noticed."""
    return await asyncio.wait_for(
        psycopg.AsyncConnection.connect(
            conninfo,
            autocommit=True,
            connect_timeout=max(1, int(timeout)),
            keepalives=1,
            keepalives_idle=30,
            keepalives_interval=10,
            keepalives_count=3,
            application_name=f"convo-worker {worker_id}"[:63],
        ),
        timeout,
    )


async def close_quietly(conn: psycopg.AsyncConnection[Any] | None) -> None:
    if conn is None or conn.closed:
        return
    try:
        await conn.close()
    except Exception:  # a broken connection may refuse even that
        pass


def reusable(conn: psycopg.AsyncConnection[Any]) -> bool:
    """Whether conn can take the next call: open, and not inside a call
    (one interrupted by a timeout or a cancel leaves it ACTIVE)."""
    return not conn.closed and not conn.broken and conn.pgconn.transaction_status == pq.TransactionStatus.IDLE


class Pool:
    """A few connections shared by the claim loop, the context reads and
    the single calls; opened when first needed, closed when broken. A
    caller waits for a free one: a busy pool slows calls, it never fails
    them."""

    def __init__(self, conninfo: str, worker_id: str, size: int, timeout: float) -> None:
        self._conninfo = conninfo
        self._worker_id = worker_id
        self._timeout = timeout
        self._idle: list[psycopg.AsyncConnection[Any]] = []
        self._free = asyncio.Semaphore(size)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        async with self._free:
            conn = None
            while self._idle and conn is None:
                candidate = self._idle.pop()
                if reusable(candidate):
                    conn = candidate
                else:
                    await close_quietly(candidate)
            if conn is None:
                conn = await connect(self._conninfo, self._worker_id, self._timeout)
            try:
                yield conn
            finally:
                if reusable(conn):
                    self._idle.append(conn)
                else:
                    await close_quietly(conn)

    async def fetch(self, sql: str, params: tuple[Any, ...] | dict[str, Any]) -> list[tuple[Any, ...]]:
        """Runs one statement, bounded by the call timeout, and returns its
        rows."""

        async def run() -> list[tuple[Any, ...]]:
            async with self.connection() as conn, conn.cursor() as cur:
                await cur.execute(sql, params)
                return await cur.fetchall() if cur.description else []

        return await asyncio.wait_for(run(), self._timeout)

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            await close_quietly(conn)


async def with_retries(what: str, fn: Callable[[], Awaitable[T]], deadline: float) -> T:
    """fn(), called again after a backoff while it fails retryably, until
    the deadline (of the event loop's clock)."""
    loop = asyncio.get_running_loop()
    delay = 0.05
    while True:
        try:
            return await fn()
        except Exception as err:
            if not retryable(err) or loop.time() + delay > deadline:
                raise
            log.warning("%s: retrying in %.2fs: %s", what, delay, message_of(err))
            await asyncio.sleep(delay)
            delay = min(2 * delay, 2.0)
