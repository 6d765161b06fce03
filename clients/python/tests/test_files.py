"""The files of a prompt's context, against real PostgreSQL: the job gives
each user message its files with their bytes (a message of files only
included), a handler acknowledges them from the bytes as the demo model
does, and the OpenAI adapter's messages carry them as content parts."""

from __future__ import annotations

import base64
import hashlib
import uuid
from typing import Any

from conftest import Client
from convo_worker import Job, PromptFile
from convo_worker.job import Message
from convo_worker.openai import chat_content, chat_messages, responses_input
from helpers import running

CHUNK = 256 * 1024


async def upload(client: Client, filename: str, media_type: str, data: bytes) -> str:
    """Stores data as owner "local"'s file, as an upload does (chunks of
    256 KiB), and returns its id."""
    blob, file_id = str(uuid.uuid4()), str(uuid.uuid4())
    sha = hashlib.sha256(data).hexdigest()
    await client.one("INSERT INTO convo.file_blobs (id, owner, sha256, size, storage) VALUES (%s, 'local', %s, %s, 'postgres') RETURNING id",
                     blob, sha, len(data))
    for seq in range(0, (len(data) + CHUNK - 1) // CHUNK):
        await client.one("INSERT INTO convo.file_chunks (blob_id, seq, data) VALUES (%s, %s, %s) RETURNING seq",
                         blob, seq, data[seq * CHUNK:(seq + 1) * CHUNK])
    await client.one("INSERT INTO convo.files (id, owner, blob_id, filename, media_type, size, sha256) "
                     "VALUES (%s, 'local', %s, %s, %s, %s, %s) RETURNING id", file_id, blob, filename, media_type, len(data), sha)
    return file_id


async def send_files(client: Client, text: str, file_ids: list[str], conversation: str | None = None) -> str:
    row = await client.one(
        "SELECT prompt_ids[1]::text FROM convo.send_message('local', %s, %s, '[{}]'::jsonb, NULL, %s::uuid[])",
        conversation, text, file_ids,
    )
    return row[0]


def acknowledge(f: PromptFile) -> str:
    """What the demo model says of a file, from its bytes."""
    line = f"You attached {f.describe()}"
    if f.is_text and f.data is not None:
        return line + f'; its first line: "{f.data.decode().splitlines()[0]}".'
    return line + "."


async def test_job_gives_each_user_message_its_files(dsn: str, client: Client) -> None:
    notes = await upload(client, "notes.txt", "text/plain; charset=utf-8", b"Hello from the notes\nsecond line\n")
    big = bytes((i * 7) & 0xFF for i in range(2 * CHUNK + 1000))
    big_id = await upload(client, "big.bin", "application/octet-stream", big)
    jobs: list[Job] = []

    async def handle(job: Job) -> None:
        jobs.append(job)
        job.reply.text("\n".join(acknowledge(f) for f in job.last_user_files))

    async with running(dsn, handle, slots=1):
        first = await send_files(client, "see the notes", [notes])
        assert (await client.settled(first))["status"] == "completed"
        assert (await client.blocks(first))[0]["content"] == \
            'You attached notes.txt (text/plain, 33 B); its first line: "Hello from the notes".'
        second = await send_files(client, "", [big_id], await client.conversation_of(first))
        assert (await client.settled(second))["status"] == "completed"

    messages = jobs[1].messages
    assert [m.role for m in messages] == ["user", "assistant", "user"]
    assert messages[0].text == "see the notes" and [f.filename for f in messages[0].files] == ["notes.txt"]
    assert messages[2].text == "" and len(messages[2].files) == 1
    f = messages[2].files[0]
    assert f.id == big_id and f.data == big and f.size == len(big) and f.storage == "postgres"


async def test_a_file_past_max_file_bytes_comes_without_its_bytes(dsn: str, client: Client) -> None:
    file_id = await upload(client, "notes.txt", "text/plain", b"0123456789")
    seen: list[PromptFile] = []

    async def handle(job: Job) -> None:
        seen.extend(job.last_user_files)
        job.reply.text("ok")

    async with running(dsn, handle, slots=1, max_file_bytes=9):
        prompt = await send_files(client, "hi", [file_id])
        assert (await client.settled(prompt))["status"] == "completed"
    assert len(seen) == 1 and seen[0].filename == "notes.txt" and seen[0].data is None


def file(name: str, media_type: str, data: bytes | None, size: int | None = None) -> PromptFile:
    return PromptFile(id=name, filename=name, media_type=media_type, size=len(data or b"") if size is None else size,
                      sha256="", storage="postgres", blob_id="b", data=data)


def test_chat_content_parts() -> None:
    png, pdf = b"\x89PNG\r\n\x1a\n-image", b"%PDF-1.7\n-pdf"
    m = Message(role="user", text="what are these?", files=(
        file("photo.png", "image/png", png),
        file("scan.pdf", "application/pdf", pdf),
        file("notes.txt", "text/plain; charset=utf-8", b"first line\nsecond"),
        file("long.txt", "text/plain", "é".encode() * 40),
        file("archive.zip", "application/zip", b"PK\x03\x04"),
        file("far.png", "image/png", None, size=10),
    ))
    b64 = lambda b: base64.b64encode(b).decode()  # noqa: E731
    assert chat_content(m, max_text_bytes=51) == [
        {"type": "text", "text": "what are these?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + b64(png)}},
        {"type": "file", "file": {"filename": "scan.pdf", "file_data": "data:application/pdf;base64," + b64(pdf)}},
        {"type": "text", "text": "The user attached notes.txt (text/plain, 17 B). Its content:\n\nfirst line\nsecond"},
        {"type": "text", "text": "The user attached long.txt (text/plain, 80 B). Its first 50 B (the rest is cut):\n\n" + "é" * 25},
        {"type": "text", "text": "The user attached archive.zip (application/zip, 4 B); its content is not shown to you "
                                 "(this worker sends images, PDFs and text)."},
        {"type": "text", "text": "The user attached far.png (image/png, 10 B); its content is not available to this worker."},
    ]
    assert chat_content(Message(role="user", text="plain")) == "plain"


def test_chat_messages_and_responses_input_carry_files() -> None:
    job: Any = type("J", (), {"messages": [
        Message(role="user", files=(file("photo.png", "image/png", b"\x89PNG"),)),
    ]})()
    assert chat_messages(job) == [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(b"\x89PNG").decode()}}]}]
    assert responses_input(job) == [{"role": "user", "content": [
        {"type": "input_image", "image_url": "data:image/png;base64," + base64.b64encode(b"\x89PNG").decode()}]}]
