"""What a handler is given: the prompt, its context, a reply writer and a
stop signal."""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from .pause import InputRequest
from .reply import Reply

Role = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class ContextBlock:
    """One finished block of the conversation before the prompt: a row of
    the view ``convo.prompt_context`` (docs/worker-api.md), in order."""

    message_id: str
    role: str
    block_type: str  # text, structured, tool_use or tool_result
    content: str
    metadata: dict[str, Any]
    tool_call_id: str | None = None
    tool_name: str | None = None
    tool_input: Any = None
    tool_status: str | None = None
    tool_output: str | None = None
    tool_error: str | None = None
    #: The message's position in the conversation (orders the messages).
    message_position: int = 0


@dataclass(frozen=True)
class PromptFile:
    """A file the user attached to a message of the context (a row of
    ``convo.prompt_files``, docs/worker-api.md): an image, a PDF, a
    document. ``data`` holds its bytes, read before the handler runs and
    checked against ``size`` and ``sha256``; it is None for a file whose
    bytes are in S3 (``storage`` "s3": the object ``blob_id`` of the
    server's bucket) and for one larger than ``Settings.max_file_bytes``."""

    id: str
    filename: str
    #: The media type decided from the bytes when uploaded, e.g.
    #: "image/png" or "text/plain; charset=utf-8".
    media_type: str
    size: int
    sha256: str  # lower-case hex
    storage: str  # "postgres" or "s3"
    blob_id: str
    data: bytes | None = field(default=None, repr=False)

    @property
    def base_type(self) -> str:
        """The media type without its parameters, in lower case."""
        return self.media_type.split(";", 1)[0].strip().lower()

    @property
    def is_image(self) -> bool:
        """An image every vision model reads: PNG, JPEG, GIF or WebP (never SVG)."""
        return self.base_type in ("image/png", "image/jpeg", "image/gif", "image/webp")

    @property
    def is_pdf(self) -> bool:
        return self.base_type == "application/pdf"

    @property
    def is_text(self) -> bool:
        """Text a model reads as it is: text/* and JSON."""
        t = self.base_type
        return t.startswith("text/") or t == "application/json" or t.endswith("+json")

    def data_url(self) -> str:
        """The bytes as a base64 data: URL (ValueError when ``data`` is None)."""
        if self.data is None:
            raise ValueError(f"file {self.id} ({self.filename}): its bytes were not read")
        return f"data:{self.base_type};base64,{base64.b64encode(self.data).decode('ascii')}"

    def describe(self) -> str:
        """The file named for a model or a person: "notes.txt (text/plain, 1.2 KB)"."""
        return f"{self.filename} ({self.base_type}, {human_bytes(self.size)})"


def human_bytes(n: int) -> str:
    """n bytes in B, KB, MB or GB (powers of 1000, one decimal below 10),
    as the Go runtime writes them."""
    units = ["B", "KB", "MB", "GB", "TB"]
    v, u = float(n), 0
    while v >= 1000 and u < len(units) - 1:
        v /= 1000
        u += 1
    if u == 0:
        return f"{n} B"
    return f"{v:.1f} {units[u]}" if v < 10 else f"{v:.0f} {units[u]}"


#: The files of a context's messages, by message id: the message's
#: position and its files, in order.
ContextFiles = dict[str, tuple[int, list[PromptFile]]]


@dataclass(frozen=True)
class HistoryToolCall:
    """A tool call an assistant turn made. ``id`` is convo's id of the
    call; ``arguments`` its input as JSON text."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Message:
    """One turn of the model's history, built from the context blocks as
    the Go runtime builds it: user and system text; an assistant turn's
    text and tool calls, each answered by a ``tool`` message (its
    ``tool_result`` block, or else the call's own output or error)."""

    role: Role
    text: str = ""
    tool_calls: tuple[HistoryToolCall, ...] = ()
    tool_call_id: str | None = None  # tool messages: the call answered
    tool_name: str | None = None
    #: A user message's files, in order, after its text (which is empty
    #: for a message of files only).
    files: tuple[PromptFile, ...] = ()


def history(blocks: list[ContextBlock], files: ContextFiles | None = None) -> list[Message]:
    """The model's history from the context blocks (in order), each user
    message with its files; a message of files only, which has no block,
    is placed by its position."""
    files = files or {}
    present = {b.message_id for b in blocks}
    only_files = sorted((pos, mid) for mid, (pos, _) in files.items() if mid not in present)
    out: list[Message] = []

    def flush_before(position: int | None) -> None:
        while only_files and (position is None or only_files[0][0] < position):
            _, mid = only_files.pop(0)
            out.append(Message(role="user", files=tuple(files[mid][1])))

    start = 0
    while start < len(blocks):
        end = start
        while end < len(blocks) and blocks[end].message_id == blocks[start].message_id:
            end += 1
        message = blocks[start:end]
        start = end
        flush_before(message[0].message_position)
        if message[0].role == "assistant":
            out.extend(_assistant_turns(message))
            continue
        parts = [b.content for b in message if b.block_type in ("text", "structured")]
        own = tuple(files[message[0].message_id][1]) if message[0].message_id in files else ()
        if parts or own:
            out.append(Message(role=message[0].role, text="\n\n".join(parts), files=own))  # type: ignore[arg-type]
    flush_before(None)
    return out


@dataclass
class _Call:
    call: HistoryToolCall
    fallback: str
    result: str | None = None


def _assistant_turns(blocks: list[ContextBlock]) -> list[Message]:
    """One assistant message's blocks as turns: text then tool calls; the
    calls' results close a turn, and text after them starts the next."""
    out: list[Message] = []
    text: list[str] = []
    calls: list[_Call] = []
    answered = False

    def close_turn() -> None:
        nonlocal text, calls, answered
        if not text and not calls:
            return
        out.append(Message(role="assistant", text="".join(text), tool_calls=tuple(c.call for c in calls)))
        for c in calls:
            out.append(Message(role="tool", text=c.result if c.result is not None else c.fallback,
                               tool_call_id=c.call.id, tool_name=c.call.name))
        text, calls, answered = [], [], False

    for b in blocks:
        if b.block_type in ("text", "structured"):
            if calls:
                close_turn()
            text.append(b.content)
        elif b.block_type == "tool_use":
            if b.tool_call_id is None or b.tool_name is None:
                continue  # arguments without a recorded call: nothing ran
            if answered:
                close_turn()
            arguments = b.tool_input if isinstance(b.tool_input, str) else json.dumps(b.tool_input, ensure_ascii=False)
            calls.append(_Call(HistoryToolCall(b.tool_call_id, b.tool_name, arguments), _outcome(b)))
        elif b.block_type == "tool_result":
            answered = True
            target = _answered_call(calls, b.metadata)
            if target is not None:
                target.result = b.content
            else:
                text.append("\n\n" + b.content)  # a result of no known call
    close_turn()
    return out


def _answered_call(calls: list[_Call], metadata: dict[str, Any]) -> _Call | None:
    wanted = metadata.get("toolCallId") if isinstance(metadata, dict) else None
    for c in calls:
        if wanted is not None and c.call.id == wanted:
            return c
    return next((c for c in calls if c.result is None), None)


def _outcome(b: ContextBlock) -> str:
    if b.tool_error:
        return f"error: {b.tool_error}"
    if b.tool_output:
        return b.tool_output
    return "(no result)"


@dataclass
class Job:
    """One claimed prompt, handed to the handler once the prompt started.

    Stopping: when the prompt must stop (the user cancelled it, its lease
    was lost, or the worker stops after its drain timeout) the runtime
    cancels the handler's task (``asyncio.CancelledError`` at its next
    await, which closes an HTTP stream it was reading), sets ``stopped``
    and ``stop_reason``, and from then on every write of ``reply`` raises
    PromptStopped. Code that cannot be cancelled (a thread) can poll
    ``stopped``. Let the CancelledError through: the prompt settles and its
    slot frees when it is stopped, whatever the handler does, and a
    handler that swallows the cancellation goes on in the background with
    every write raising PromptStopped."""

    prompt_id: str
    conversation_id: str
    message_id: str
    #: The JSON object the client asked with, e.g. {"model": "gpt-4o-mini"}.
    model_config: dict[str, Any]
    #: Claims of the prompt's current run (1 unless earlier claims were
    #: handed back unstarted).
    attempts: int
    worker_id: str
    #: The finished blocks of the conversation before the prompt.
    context: list[ContextBlock]
    reply: Reply
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    #: Why the prompt stopped: "cancelled" (by the user), "refused" (a
    #: write or heartbeat of it was refused: its lease was lost, say) or
    #: "shutdown"; None while it runs.
    stop_reason: str | None = None
    #: The prompt paused for input before (a tool call asked, see
    #: ``ToolCall.request_input``) and was answered: this claim resumes
    #: it. ``reply_so_far`` and ``inputs`` are then set, and the reply
    #: goes on in the same assistant message.
    resumed: bool = False
    #: The reply's own finished blocks (``convo.prompt_reply``), in order;
    #: empty unless resumed.
    reply_so_far: list[ContextBlock] = field(default_factory=list)
    #: The reply's input requests with their answers
    #: (``convo.prompt_inputs``), in the order their calls started.
    inputs: list[InputRequest] = field(default_factory=list)
    #: The files of the context's messages (``convo.prompt_files``), by
    #: message; ``messages`` gives each user message its own.
    files: ContextFiles = field(default_factory=dict)
    #: The W3C trace context (``traceparent``, ``tracestate`` headers'
    #: values) of the request that sent the prompt's message
    #: (``convo.prompt_trace``); None when it had none. Continue it with
    #: OpenTelemetry to make the reply part of the send's trace
    #: (docs/workers-python.md, "Tracing").
    traceparent: str | None = None
    tracestate: str | None = None
    # tool_result blocks written for resumed calls, for the history.
    _results: list[ContextBlock] = field(default_factory=list, repr=False)

    @property
    def answered(self) -> list[InputRequest]:
        """The inputs to act on now: answered or expired, the call not
        ended yet (``InputRequest.resolve``)."""
        return [i for i in self.inputs if i.actionable]

    @property
    def messages(self) -> list[Message]:
        """The model's history (see Message). A resumed job's ends with the
        reply so far as the assistant's turns, each call answered by its
        result: those written before the pause, and those written since
        (``InputRequest.resolve``), placed after the reply's last tool
        block as the Go runtime does (text streamed after the calls then
        reads as the next turn)."""
        own = list(self.reply_so_far)
        if self._results:
            at = len(own)
            for i in range(len(own) - 1, -1, -1):
                if own[i].block_type in ("tool_use", "tool_result"):
                    at = i + 1
                    break
            own[at:at] = self._results
        return history(self.context + own, self.files)

    @property
    def last_user_text(self) -> str:
        """The text of the latest user message: the one being answered."""
        return next((m.text for m in reversed(self.messages) if m.role == "user"), "")

    @property
    def last_user_files(self) -> tuple[PromptFile, ...]:
        """The files of the latest user message: the one being answered."""
        return next((m.files for m in reversed(self.messages) if m.role == "user"), ())
