"""Fixtures: a fresh database per test, cloned from the migrated template
that ``go run ./internal/pgtest/withdb`` prepares, and a helper that plays
the client's side in SQL."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

# The package from the source tree, unless an installed one is asked for
# (CONVO_TEST_INSTALLED=1: the tests of the sdist installed in a venv).
if os.environ.get("CONVO_TEST_INSTALLED") != "1":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

T = TypeVar("T")


def _test_env() -> tuple[str, str]:
    admin = os.environ.get("CONVO_TEST_ADMIN_URL")
    template = os.environ.get("CONVO_TEST_TEMPLATE")
    if not admin or not template:
        pytest.fail(
            "CONVO_TEST_ADMIN_URL and CONVO_TEST_TEMPLATE are not set: run the tests under "
            "`go run ./internal/pgtest/withdb -- /usr/bin/python3 -m pytest clients/python/tests` "
            "from the repository root, which starts PostgreSQL and migrates a template database",
            pytrace=False,
        )
    return admin, template


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + name))


@pytest.fixture
async def dsn() -> AsyncIterator[str]:
    """A connection string of a new database, a copy of the migrated
    template, dropped after the test."""
    admin_url, template = _test_env()
    name = f"pytest_{uuid.uuid4().hex}"
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
        await admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    url = _with_database(admin_url, name)
    try:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            # Tests queue more prompts per owner than the default quota.
            await conn.execute("UPDATE convo.limits SET max_active_prompts = 0")
        yield url
    finally:
        async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as admin:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def eventually(what: str, check: Callable[[], Awaitable[T | None]], timeout: float = 15.0) -> T:
    """Polls check until it returns something truthy, failing with what
    after timeout seconds (generous: the machine may be loaded)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await check()
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


class Client:
    """The client's and the test's side of the database, in SQL."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn

    async def one(self, sql: str, *params: Any) -> Any:
        async with self.conn.cursor() as cur:
            await cur.execute(sql, params)
            return await cur.fetchone()

    async def all(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        async with self.conn.cursor() as cur:
            await cur.execute(sql, params)
            return await cur.fetchall()

    async def send(self, text: str, *, owner: str = "local", config: dict[str, Any] | None = None,
                   conversation: str | None = None) -> str:
        """Sends a user message (a new conversation unless given) and
        returns the queued prompt's id."""
        row = await self.one(
            "SELECT prompt_ids[1]::text FROM convo.send_message(%s, %s, %s, %s::jsonb)",
            owner, conversation, text, json.dumps([config or {}]),
        )
        return row[0]

    async def conversation_of(self, prompt_id: str) -> str:
        return (await self.one("SELECT conversation_id::text FROM convo.prompts WHERE id = %s", prompt_id))[0]

    async def prompt(self, prompt_id: str) -> dict[str, Any]:
        status, error, worker = await self.one(
            "SELECT status, error, worker FROM convo.prompts WHERE id = %s", prompt_id)
        return {"status": status, "error": error, "worker": worker}

    async def settled(self, prompt_id: str, timeout: float = 20.0) -> dict[str, Any]:
        """Waits until the prompt is completed, failed or cancelled."""

        async def check() -> dict[str, Any] | None:
            p = await self.prompt(prompt_id)
            return p if p["status"] in ("completed", "failed", "cancelled") else None

        return await eventually(f"prompt {prompt_id} to settle", check, timeout)

    async def blocks(self, prompt_id: str) -> list[dict[str, Any]]:
        """The reply's blocks in order, each with its tool call."""
        rows = await self.all(
            """SELECT b.block_type, b.status, b.content, b.metadata, t.name, t.input, t.status, t.output, t.error
                 FROM convo.blocks b LEFT JOIN convo.tool_calls t ON t.block_id = b.id
                WHERE b.prompt_id = %s ORDER BY b.position""", prompt_id)
        out = []
        for btype, bstatus, content, meta, name, tinput, tstatus, output, error in rows:
            block: dict[str, Any] = {"type": btype, "status": bstatus, "content": content, "metadata": meta}
            if name is not None:
                block["toolCall"] = {"name": name, "input": tinput, "status": tstatus, "output": output, "error": error}
            out.append(block)
        return out

    async def streamed_text(self, prompt_id: str) -> str:
        """Every delta written to the prompt's text blocks, in order (what
        a reader saw, doubled text included)."""
        rows = await self.all(
            """SELECT e.payload->>'content' FROM convo.events e JOIN convo.blocks b ON b.id = e.block_id
                WHERE e.prompt_id = %s AND e.kind = 'blockDelta' AND b.block_type = 'text' ORDER BY e.seq""",
            prompt_id)
        return "".join(r[0] for r in rows)

    async def cancel(self, prompt_id: str) -> None:
        await self.one("SELECT convo.cancel_prompt(%s)", prompt_id)

    async def expire_lease(self, prompt_id: str) -> None:
        """The lease runs out and the reaper fails the prompt, for sure.

        One transaction that first locks the prompt's conversation, as
        write_batch does (waiting for a batch in flight), then moves the
        lease into the past and calls expire_leases. Apart, a heartbeat
        committed between the update and the call would extend the lease
        again. Without the lock, a batch that locked the conversation and
        waits for the prompt's row (which the update holds) makes
        expire_leases skip the prompt (it never waits for a conversation
        locked by someone else, and takes the lock of its own transaction
        as its own); the batch's next heartbeat then extends the lease and
        the prompt runs on as if nothing had happened."""
        async with self.conn.transaction():
            await self.one(
                """SELECT 1 FROM convo.conversations c JOIN convo.prompts p ON p.conversation_id = c.id
                    WHERE p.id = %s FOR NO KEY UPDATE OF c""", prompt_id)
            await self.one("UPDATE convo.prompts SET lease_expires_at = now() - interval '1 second' WHERE id = %s RETURNING id", prompt_id)
            (expired,) = await self.one("SELECT convo.expire_leases()")
        status = (await self.prompt(prompt_id))["status"]
        assert expired == 1 and status == "failed", (
            f"expire_leases failed {expired} prompts and left prompt {prompt_id} {status}: want it failed")


@pytest.fixture
async def client(dsn: str) -> AsyncIterator[Client]:
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        yield Client(conn)
