"""Adapters for the OpenAI Python SDK's streams (and any OpenAI-compatible
server's): write a Chat Completions stream or a Responses stream into a
reply, tool calls included.

Each adapter takes the async iterable the SDK returns with
``stream=True`` (``AsyncOpenAI().chat.completions.create(...)``,
``AsyncOpenAI().responses.create(...)``), or any async iterable of the
same items as plain dicts (the JSON of the SSE events), and writes one
round of the model: it returns when the stream ends, with the tool calls
the model made recorded and waiting for their results. The tool loop
stays yours: run the tools, ``complete`` or ``fail`` each call, and ask
the model again (``ChatResult.assistant_message``, ``tool_message``,
``function_call_output``).

A stream that fails (the SDK raises, or the stream carries an error) ends
the round with an exception: the SDK's own, or ModelError with the
model's error text. Let it through and the prompt fails with that text,
keeping what was written before.

This module does not import the SDK: it reads the documented shapes by
attribute or by key.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ConvoWorkerError
from .job import Job, Message, PromptFile, human_bytes
from .reply import Reply, ToolCall


class ModelError(ConvoWorkerError):
    """The model's stream failed; the message is the model's error text."""


def _get(obj: Any, name: str) -> Any:
    """A field of an SDK object (attribute) or of its JSON (key)."""
    if obj is None:
        return None
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _error_text(error: Any, fallback: str) -> str:
    if isinstance(error, str):
        return error or fallback
    message = _get(error, "message")
    if isinstance(message, str) and message:
        code = _get(error, "code") or _get(error, "type")
        return f"{message} ({code})" if isinstance(code, str) and code and code not in message else message
    return fallback


@dataclass
class _StreamingCall:
    """A tool call of a Chat Completions stream, by index: its id and name
    may come in pieces, its arguments before its name."""

    id: str = ""
    name: str = ""
    pending: list[str] = field(default_factory=list)
    call: ToolCall | None = None


@dataclass
class ChatResult:
    """One round of a Chat Completions stream, as written."""

    #: ``stop``, ``length``, ``tool_calls``, ``content_filter`` …
    finish_reason: str
    text: str
    reasoning: str
    #: The calls the model made, recorded (their status ``started``, or
    #: ``failed`` when their arguments were not JSON); complete or fail
    #: each.
    tool_calls: list[ToolCall]

    def assistant_message(self) -> dict[str, Any]:
        """The model's turn, for the next request's ``messages``."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [
                {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments_text}}
                for c in self.tool_calls
            ]
        return message


def tool_message(call: ToolCall, content: str) -> dict[str, Any]:
    """A Chat Completions ``tool`` message answering call."""
    return {"role": "tool", "tool_call_id": call.call_id, "content": content}


async def write_chat_completion(reply: Reply, stream: AsyncIterable[Any], *, structured: bool = False) -> ChatResult:
    """Writes a Chat Completions stream (choice 0) into reply: reasoning
    (``delta.reasoning_content`` or ``delta.reasoning``, as OpenAI-compatible
    servers send it) as a ``reasoning`` block, ``delta.content`` as a
    ``text`` block (a ``structured`` one with structured=True, for a
    ``response_format`` of JSON), ``delta.refusal`` as text, and
    ``delta.tool_calls`` (interleaved by index, arguments in pieces) as
    tool calls, recorded once the stream finished. A stream that ends
    without a ``finish_reason`` raises ModelError."""
    text: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, _StreamingCall] = {}
    finish_reason: str | None = None
    async for chunk in stream:
        error = _get(chunk, "error")
        if error:
            raise ModelError(_error_text(error, "the model's stream failed"))
        for choice in _get(chunk, "choices") or ():
            if (_get(choice, "index") or 0) != 0:
                continue  # n > 1: only the first choice is the reply
            delta = _get(choice, "delta")
            thought = _get(delta, "reasoning_content") or _get(delta, "reasoning")
            if isinstance(thought, str) and thought:
                reasoning.append(thought)
                reply.reasoning(thought)
            for piece in (_get(delta, "content"), _get(delta, "refusal")):
                if isinstance(piece, str) and piece:
                    text.append(piece)
                    (reply.structured if structured else reply.text)(piece)
            for tc in _get(delta, "tool_calls") or ():
                _chat_tool_delta(reply, calls, tc)
            if _get(choice, "finish_reason"):
                finish_reason = str(_get(choice, "finish_reason"))
    if finish_reason is None:
        raise ModelError("the stream ended before the answer finished")
    reply.end_block()
    recorded = []
    for index in sorted(calls):
        sc = calls[index]
        if sc.call is None:
            raise ModelError(f"the model streamed tool call {index} without a tool name")
        sc.call.finish_arguments()
        recorded.append(sc.call)
    return ChatResult(finish_reason, "".join(text), "".join(reasoning), recorded)


def _chat_tool_delta(reply: Reply, calls: dict[int, _StreamingCall], tc: Any) -> None:
    index = _get(tc, "index") or 0
    sc = calls.setdefault(index, _StreamingCall())
    function = _get(tc, "function")
    # First non-empty value wins, field by field.
    sc.id = sc.id or (_get(tc, "id") or "")
    sc.name = sc.name or (_get(function, "name") or "")
    arguments = _get(function, "arguments")
    if isinstance(arguments, str) and arguments:
        sc.pending.append(arguments)
    if sc.call is None and sc.name:
        sc.call = reply.start_tool_call(sc.name, call_id=sc.id or None)
    if sc.call is not None:
        for piece in sc.pending:
            sc.call.arguments(piece)
        sc.pending.clear()


@dataclass
class ResponseResult:
    """One Responses stream, as written."""

    #: ``completed`` or ``incomplete`` (``incomplete_reason`` says why).
    status: str
    text: str
    reasoning: str
    tool_calls: list[ToolCall]
    response_id: str | None = None
    incomplete_reason: str | None = None


def function_call_output(call: ToolCall, output: str) -> dict[str, Any]:
    """A Responses input item answering call (for the next request's
    ``input``, with ``previous_response_id``)."""
    return {"type": "function_call_output", "call_id": call.call_id, "output": output}


async def write_response(reply: Reply, stream: AsyncIterable[Any], *, structured: bool = False) -> ResponseResult:
    """Writes a Responses stream into reply, by event ``type``: output
    text (``response.output_text.delta``, and refusals) as a ``text`` block
    (``structured`` with structured=True), reasoning
    (``response.reasoning_summary_text.delta``,
    ``response.reasoning_text.delta``) as a ``reasoning`` block, one per
    output item, and ``function_call`` items as tool calls (arguments from
    ``response.function_call_arguments.delta``, or the item's own when none
    streamed), recorded when the item is done. ``response.failed`` and
    ``error`` raise ModelError with the model's message, as does a stream
    that ends before ``response.completed`` or ``response.incomplete``."""
    text: list[str] = []
    reasoning: list[str] = []
    calls: dict[int, ToolCall] = {}
    streamed_args: set[int] = set()
    recorded: list[ToolCall] = []
    status: str | None = None
    response_id: str | None = None
    incomplete_reason: str | None = None
    async for event in stream:
        kind = _get(event, "type")
        index = _get(event, "output_index") or 0
        if kind == "response.output_item.added":
            item = _get(event, "item")
            if _get(item, "type") == "function_call":
                calls[index] = reply.start_tool_call(_get(item, "name") or "", call_id=_get(item, "call_id") or None)
        elif kind in ("response.output_text.delta", "response.refusal.delta"):
            delta = _get(event, "delta") or ""
            text.append(delta)
            (reply.structured if structured else reply.text)(delta)
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            delta = _get(event, "delta") or ""
            reasoning.append(delta)
            reply.reasoning(delta)
        elif kind == "response.function_call_arguments.delta":
            call = calls.get(index)
            if call is None:
                raise ModelError(f"the stream sent arguments for output item {index}, which is not a function call")
            call.arguments(_get(event, "delta") or "")
            streamed_args.add(index)
        elif kind == "response.output_item.done":
            item = _get(event, "item")
            call = calls.get(index)
            if _get(item, "type") == "function_call" and call is not None:
                if index not in streamed_args and _get(item, "arguments"):
                    call.arguments(_get(item, "arguments"))
                call.finish_arguments()
                recorded.append(call)
            elif _get(item, "type") in ("message", "reasoning"):
                reply.end_block()
        elif kind in ("response.created", "response.in_progress"):
            response_id = _get(_get(event, "response"), "id") or response_id
        elif kind == "response.completed":
            status = "completed"
            response_id = _get(_get(event, "response"), "id") or response_id
        elif kind == "response.incomplete":
            status = "incomplete"
            response = _get(event, "response")
            incomplete_reason = _get(_get(response, "incomplete_details"), "reason")
        elif kind == "response.failed":
            raise ModelError(_error_text(_get(_get(event, "response"), "error"), "the response failed"))
        elif kind == "error":
            raise ModelError(_error_text(event, "the model's stream failed"))
    if status is None:
        raise ModelError("the stream ended before the response completed")
    reply.end_block()
    return ResponseResult(status, "".join(text), "".join(reasoning), recorded, response_id, incomplete_reason)


#: What chat_messages and responses_input send of a text or JSON file at
#: most, in bytes (the Go runtime's worker/openai default).
MAX_TEXT_FILE_BYTES = 100_000


def _file_text(f: PromptFile, max_text_bytes: int) -> str | None:
    """The text part a file is given as, or None for an image or a PDF
    whose bytes were read (those go as images and files)."""
    if f.data is None:
        return f"The user attached {f.describe()}; its content is not available to this worker."
    if f.is_image or f.is_pdf:
        return None
    if f.is_text:
        data, cut = f.data[:max_text_bytes], len(f.data) > max_text_bytes
        if cut:
            # Not in the middle of a character.
            for _ in range(3):
                try:
                    data.decode("utf-8")
                    break
                except UnicodeDecodeError:
                    data = data[:-1]
        text = data.decode("utf-8", errors="replace")
        if cut:
            return f"The user attached {f.describe()}. Its first {human_bytes(len(data))} (the rest is cut):\n\n{text}"
        return f"The user attached {f.describe()}. Its content:\n\n{text}"
    return (f"The user attached {f.describe()}; its content is not shown to you "
            "(this worker sends images, PDFs and text).")


def chat_content(m: Message, max_text_bytes: int = MAX_TEXT_FILE_BYTES) -> str | list[dict[str, Any]]:
    """A user message's Chat Completions ``content``: its text, or, when it
    holds files, an array of parts as the Go runtime's worker/openai sends
    them: the text, then an image (PNG, JPEG, GIF, WebP) as an
    ``image_url`` part and a PDF as a ``file`` part (base64 data URLs), a
    text or JSON file as a ``text`` part of its first max_text_bytes
    (saying when cut), and any other file, or one whose bytes were not
    read (``PromptFile.data`` is None), as a line of text naming it."""
    if not m.files:
        return m.text
    parts: list[dict[str, Any]] = [{"type": "text", "text": m.text}] if m.text else []
    for f in m.files:
        text = _file_text(f, max_text_bytes)
        if text is not None:
            parts.append({"type": "text", "text": text})
        elif f.is_image:
            parts.append({"type": "image_url", "image_url": {"url": f.data_url()}})
        else:
            parts.append({"type": "file", "file": {"filename": f.filename, "file_data": f.data_url()}})
    return parts


def chat_messages(job: Job, system: str | None = None, *,
                  max_text_file_bytes: int = MAX_TEXT_FILE_BYTES) -> list[dict[str, Any]]:
    """The job's history as Chat Completions ``messages``: an optional
    system prompt, user and assistant text (a user message's files as
    content parts: chat_content), the assistant's tool calls (ids being
    convo's tool call ids), each answered by a ``tool`` message."""
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in job.messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.text})
        elif m.role == "assistant":
            message: dict[str, Any] = {"role": "assistant", "content": m.text or None}
            if m.tool_calls:
                message["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in m.tool_calls
                ]
            out.append(message)
        elif m.role == "user":
            out.append({"role": "user", "content": chat_content(m, max_text_file_bytes)})
        else:
            out.append({"role": m.role, "content": m.text})
    return out


def responses_input(job: Job, *, max_text_file_bytes: int = MAX_TEXT_FILE_BYTES) -> list[dict[str, Any]]:
    """The job's history as a Responses ``input``: messages (a user
    message's files as ``input_image``, ``input_file`` and ``input_text``
    parts, chosen as chat_content chooses), and the assistant's tool calls
    as ``function_call`` items each followed by its
    ``function_call_output``."""
    out: list[dict[str, Any]] = []
    for m in job.messages:
        if m.role == "tool":
            out.append({"type": "function_call_output", "call_id": m.tool_call_id, "output": m.text})
            continue
        if m.files:
            parts: list[dict[str, Any]] = [{"type": "input_text", "text": m.text}] if m.text else []
            for f in m.files:
                text = _file_text(f, max_text_file_bytes)
                if text is not None:
                    parts.append({"type": "input_text", "text": text})
                elif f.is_image:
                    parts.append({"type": "input_image", "image_url": f.data_url()})
                else:
                    parts.append({"type": "input_file", "filename": f.filename, "file_data": f.data_url()})
            out.append({"role": m.role, "content": parts})
        elif m.text:
            out.append({"role": m.role, "content": m.text})
        for c in m.tool_calls:
            out.append({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments})
    return out


__all__ = [
    "MAX_TEXT_FILE_BYTES",
    "ChatResult",
    "ModelError",
    "ResponseResult",
    "chat_content",
    "chat_messages",
    "function_call_output",
    "responses_input",
    "tool_message",
    "write_chat_completion",
    "write_response",
]
