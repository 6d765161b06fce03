"""The reply writer a handler streams its output into."""

from __future__ import annotations

import datetime
import json
import re
import uuid
from collections.abc import Callable
from typing import Any, Literal

from . import jsonlimit
from ._batch import Op, PromptWriter, clean
from .errors import InvalidOutput

_BLOCK_TYPE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

#: The kinds of input a tool call can wait for (``convo.request_input``).
InputKind = Literal["approval", "client_tool", "question"]
INPUT_KINDS: tuple[str, ...] = ("approval", "client_tool", "question")


def compact_json(value: Any) -> str:
    """value as compact JSON, keeping non-ASCII text as it is. NaN and
    infinities are refused (ValueError): PostgreSQL's JSON has no such
    numbers, and one would fail the batch."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _metadata(metadata: dict[str, Any] | None, what: str) -> dict[str, Any] | None:
    if metadata is None:
        return None
    if not isinstance(metadata, dict):
        raise TypeError(f"{what}: metadata must be a dict (a JSON object), got {type(metadata).__name__}")
    try:
        json.dumps(metadata, allow_nan=False)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{what}: metadata must be JSON-serializable: {err}") from None
    _check_limits(metadata, f"{what}: metadata")
    return metadata


def _check_limits(value: Any, what: str) -> None:
    """Raises ValueError naming what and the value's JSONPath when value,
    as it will be written (NUL and lone surrogates become U+FFFD, as in
    every batch), breaks convo's rule for accepted JSON (jsonlimit): an
    int too big for a 64-bit float (a float inf is refused before), or
    nesting past 64 levels."""
    problem = jsonlimit.check(clean(compact_json(value)))
    if problem is not None:
        raise ValueError(f"{what}: {problem}")


def _text(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    return value


class Block:
    """One block of the reply (``text``, ``reasoning``, ``structured``, or
    a lower_snake type of your own): append text to it, then end it.
    Writes return at once; the runtime writes them in the next batch."""

    def __init__(self, writer: PromptWriter, block_type: str, metadata: dict[str, Any] | None,
                 open_blocks: dict[Block, None] | None = None) -> None:
        self._w = writer
        self._open = open_blocks
        self.id = str(uuid.uuid4())
        self.type = block_type
        self.ended = False
        # A structured block's text, checked when it ends.
        self._json: list[str] | None = [] if block_type == "structured" else None
        fields: dict[str, Any] = {"block": self.id, "type": block_type}
        if metadata:
            fields["metadata"] = metadata
        writer.enqueue(Op("start_block", fields))
        if open_blocks is not None:
            open_blocks[self] = None

    def append(self, text: str) -> None:
        """Streams text to the block (a ``blockDelta`` event once written;
        consecutive appends in one tick are written as one delta)."""
        _text(text, "Block.append: text")
        if self.ended:
            raise ValueError(f"Block.append: the {self.type} block {self.id} has ended")
        self._w.append_text("append", self.id, text)
        if self._json is not None:
            self._json.append(text)

    def end(self, metadata: dict[str, Any] | None = None) -> None:
        """Ends the block, merging metadata (top-level keys) into its
        metadata. A structured block must hold valid JSON by then
        (InvalidOutput otherwise, and the block stays open)."""
        if self.ended:
            return
        metadata = _metadata(metadata, "Block.end")
        if self._json is not None:
            try:
                json.loads("".join(self._json))
            except ValueError as err:
                raise InvalidOutput(f"the structured output is not valid JSON: {err}") from None
        fields: dict[str, Any] = {"block": self.id}
        if metadata:
            fields["metadata"] = metadata
        self._w.enqueue(Op("end_block", fields))
        self.ended = True
        if self._open is not None:
            self._open.pop(self, None)


class ToolCall:
    """A tool call of the reply: a ``tool_use`` block holding the argument
    JSON, the call recorded with its parsed input, then its output
    (``progress``) and its end (``complete`` or ``fail``), which also writes
    a ``tool_result`` block as the Go runtime does.

    ``id`` is convo's id of the call (a uuid); ``call_id`` the model's (the
    one to answer it with in the next request)."""

    def __init__(self, writer: PromptWriter, name: str, call_id: str | None, metadata: dict[str, Any] | None,
                 *, resumed: tuple[str, Any, str] | None = None) -> None:
        self._w = writer
        self.name = name
        self.input: Any = None
        #: ``streaming`` (arguments arriving), ``started``, ``running``
        #: (output written), ``completed`` or ``failed``.
        self.status = "streaming"
        self.error: str | None = None
        self.output = ""
        #: The kind of input the call waits (or waited) for, if any.
        self.input_kind: str | None = None
        self._waiting = False  # input requested in this run: it ends on a later claim
        self._arguments: list[str] = []
        # Called with each tool_result block's text and metadata (the
        # resumed job keeps them for its history).
        self._on_result: Callable[[str, dict[str, Any]], None] | None = None
        if resumed is not None:
            # A call recorded before the prompt paused: its block and the
            # call exist; only its end is left to write.
            self.id, self.input, self.input_kind = resumed
            self.call_id = call_id or self.id
            self.status = "started"
            return
        self.id = str(uuid.uuid4())
        self.call_id = call_id or f"call_{self.id.replace('-', '')[:24]}"
        self._block = Block(writer, "tool_use", {**(metadata or {}), "name": name})

    @property
    def arguments_text(self) -> str:
        """The argument JSON as streamed."""
        return "".join(self._arguments)

    def arguments(self, delta: str) -> None:
        """Streams a piece of the argument JSON (the tool_use block's text)."""
        _text(delta, "ToolCall.arguments: delta")
        if self.status != "streaming":
            raise ValueError(f"ToolCall.arguments: the arguments of tool call {self.call_id} ({self.name}) have ended")
        self._arguments.append(delta)
        self._block.append(delta)

    def finish_arguments(self) -> Any:
        """Ends the arguments: the call is recorded with their JSON as its
        input, and its block ends. Returns the parsed input. Arguments that
        are not JSON fail the call (not the prompt), as the Go runtime
        does: the input is then the text as a JSON string, ``status`` is
        ``failed`` and ``error`` says why (and None is returned). So do
        arguments that break convo's rule for accepted JSON (``jsonlimit``:
        ``{"expression": 1e400}``, nesting past 64 levels, ``\u0000``):
        ``error`` is ``invalid arguments for tool <name>: <JSONPath>:
        <reason>``, the wording of the Go and TypeScript runtimes."""
        if self.status != "streaming":
            return self.input
        raw = self.arguments_text.strip() or "{}"
        try:
            self.input = json.loads(raw)
            bad = None
        except ValueError as err:
            self.input = self.arguments_text
            bad = f"invalid argument JSON for tool {self.name}: {err}"
        else:
            # convo's rule for accepted JSON, on the text the model sent:
            # json.loads made 1e400 inf (and keeps a 400-digit int), which
            # stored would make the conversation unreadable. The call fails
            # as for arguments that are not JSON, the text kept.
            problem = jsonlimit.check(raw)
            if problem is not None:
                self.input = self.arguments_text
                bad = f"invalid arguments for tool {self.name}: {problem}"
        self._w.enqueue(Op("start_tool_call", {"block": self._block.id, "toolCall": self.id, "name": self.name, "input": self.input}))
        self._block.end({"name": self.name, "callId": self.call_id})
        self.status = "started"
        if bad is not None:
            self.fail(bad)
            return None
        return self.input

    def request_input(self, kind: InputKind, request: dict[str, Any] | None = None, *,
                      expires_at: datetime.datetime | None = None) -> None:
        """Makes the call wait for a person: an ``approval`` (request
        ``{}`` or ``{"message": …}``), a ``client_tool`` that the browser
        runs (``{}`` or ``{"outputSchema": {…}}``) or a ``question``
        (``{"question": …}``, optionally with ``"choices": […]``), until
        ``expires_at`` (timezone-aware, in the future) or for ever. The
        shapes are convo.request_input's (docs/worker-api.md, *Pauses*);
        a shape it refuses fails the prompt with a message naming the field.

        Nothing is written yet: when the handler returns, the runtime
        writes every request with ``wait_prompt`` in one transaction (no
        answer can come before the prompt is parked), the prompt waits
        holding no slot, and the handler's work on it is over. Once
        answered, a worker claims it again with ``Job.resumed`` set and
        the answers in ``Job.inputs``. The call must be recorded (its
        arguments finished) with no output, and asks once."""
        if kind not in INPUT_KINDS:
            raise ValueError(f"ToolCall.request_input: kind must be one of {', '.join(INPUT_KINDS)}, got {kind!r}")
        if request is None:
            request = {}
        if not isinstance(request, dict):
            raise TypeError(f"ToolCall.request_input: request must be a dict (a JSON object), got {type(request).__name__}")
        try:
            json.dumps(request, allow_nan=False)
        except (TypeError, ValueError) as err:
            raise TypeError(f"ToolCall.request_input: request must be JSON-serializable: {err}") from None
        _check_limits(request, "ToolCall.request_input: request")
        if expires_at is not None:
            if not isinstance(expires_at, datetime.datetime) or expires_at.tzinfo is None:
                raise TypeError("ToolCall.request_input: expires_at must be a timezone-aware datetime")
            if expires_at <= datetime.datetime.now(datetime.UTC):
                raise ValueError(f"ToolCall.request_input: expires_at must be in the future, got {expires_at.isoformat()}")
        if self.status == "streaming":
            self.finish_arguments()
        if self.status != "started" or self._waiting or self.input_kind is not None:
            what = "already requested input" if self._waiting or self.input_kind else f"has {self.status}"
            raise ValueError(f"ToolCall.request_input: tool call {self.call_id} ({self.name}) {what}")
        self._w.check()
        fields: dict[str, Any] = {"toolCall": self.id, "kind": kind, "request": request}
        if expires_at is not None:
            fields["expiresAt"] = expires_at.isoformat()
        self._w.hold_request(Op("request_input", fields), self.id, self._block.id)
        self._waiting = True
        self.input_kind = kind

    def progress(self, text: str) -> None:
        """Streams output of the running tool (``toolCallProgress``)."""
        _text(text, "ToolCall.progress: text")
        self._require_open("progress")
        self._w.append_text("tool_progress", self.id, text)
        self.output += text
        if text:
            self.status = "running"

    def complete(self, output: str | None = None) -> None:
        """Completes the call; output, when given, is appended to what
        progress wrote. A ``tool_result`` block holding output follows."""
        if output is not None:
            _text(output, "ToolCall.complete: output")
        self._require_open("complete")
        fields: dict[str, Any] = {"toolCall": self.id}
        if output:
            fields["output"] = output
        self._w.enqueue(Op("complete_tool_call", fields))
        self.output += output or ""
        self.status = "completed"
        self._result(output or "", {"outputBytes": len((output or "").encode())})

    def fail(self, error: str) -> None:
        """Fails the call with error (not empty). A ``tool_result`` block
        holding ``error: <error>`` follows, for the model to read."""
        _text(error, "ToolCall.fail: error")
        if not error.strip():
            raise ValueError("ToolCall.fail: error must not be empty")
        self._require_open("fail")
        self._w.enqueue(Op("fail_tool_call", {"toolCall": self.id, "error": error}))
        self.status = "failed"
        self.error = error
        self._result(f"error: {error}", {"isError": True})

    def _require_open(self, what: str) -> None:
        if self.status == "streaming":
            self.finish_arguments()
            if self.status == "failed":
                raise ValueError(f"ToolCall.{what}: {self.error}")
        if self.status in ("completed", "failed"):
            raise ValueError(f"ToolCall.{what}: tool call {self.call_id} ({self.name}) has {self.status}")
        if self._waiting:
            raise ValueError(f"ToolCall.{what}: tool call {self.call_id} ({self.name}) waits for input: "
                             "it ends when the prompt is resumed")

    def _result(self, text: str, extra: dict[str, Any]) -> None:
        meta = {"toolCallId": self.id, "callId": self.call_id, "tool": self.name, **extra}
        if self.input_kind is not None:
            meta["inputKind"] = self.input_kind
        block = Block(self._w, "tool_result", meta)
        block.append(text)
        block.end()
        if self._on_result is not None:
            self._on_result(text, meta)


class Reply:
    """Writes the assistant's reply of one prompt. Every method returns at
    once: the runtime writes what was queued in the next batch, in order,
    exactly once. Once the prompt must stop (cancelled, lease lost,
    shutting down, a write refused) every method raises PromptStopped.

    ``text``, ``reasoning`` and ``structured`` stream into a current block
    of that type: consecutive pieces of one kind join one block, and a
    piece of another kind (or a tool call) ends it and starts the next.
    ``start_block`` gives a block of any type to manage yourself."""

    def __init__(self, writer: PromptWriter) -> None:
        self._w = writer
        self._current: Block | None = None
        # Blocks started with start_block and not ended, which the runtime
        # ends when the handler returns.
        self._open: dict[Block, None] = {}

    def text(self, delta: str) -> None:
        """Streams a piece of answer text (a ``text`` block)."""
        self._stream("text", _text(delta, "Reply.text: delta"))

    def reasoning(self, delta: str) -> None:
        """Streams a piece of the model's reasoning (a ``reasoning`` block)."""
        self._stream("reasoning", _text(delta, "Reply.reasoning: delta"))

    def structured(self, delta: str) -> None:
        """Streams a piece of a structured answer (a ``structured`` block,
        whose text must be valid JSON when it ends)."""
        self._stream("structured", _text(delta, "Reply.structured: delta"))

    def _stream(self, block_type: str, delta: str) -> None:
        self._w.check()
        if not delta:
            return
        if self._current is None or self._current.ended or self._current.type != block_type:
            self.end_block()
            self._current = Block(self._w, block_type, None)
        self._current.append(delta)

    def end_block(self, metadata: dict[str, Any] | None = None) -> None:
        """Ends the current text, reasoning or structured block, if one is
        open; the next piece starts a new block."""
        current, self._current = self._current, None
        if current is not None:
            current.end(metadata)

    def start_block(self, block_type: str, metadata: dict[str, Any] | None = None) -> Block:
        """Opens a block of block_type (lower_snake: ``text``,
        ``reasoning``, ``structured``, ``tool_use``, ``tool_result`` or one of
        your own) at the end of the reply, with metadata (a JSON object)."""
        if not isinstance(block_type, str) or not _BLOCK_TYPE.match(block_type):
            raise ValueError(f"Reply.start_block: block_type must be lower_snake (^[a-z][a-z0-9_]{{0,63}}$), got {block_type!r}")
        return Block(self._w, block_type, _metadata(metadata, "Reply.start_block"), self._open)

    def start_tool_call(self, name: str, *, call_id: str | None = None, metadata: dict[str, Any] | None = None) -> ToolCall:
        """Opens a tool call whose argument JSON streams in
        (``ToolCall.arguments``, then ``finish_arguments``). Ends the
        current text, reasoning or structured block."""
        if not isinstance(name, str) or not name.strip():
            raise ValueError(f"Reply.start_tool_call: name must be a non-empty tool name, got {name!r}")
        if call_id is not None and not isinstance(call_id, str):
            raise TypeError(f"Reply.start_tool_call: call_id must be a str, got {type(call_id).__name__}")
        metadata = _metadata(metadata, "Reply.start_tool_call")
        self._w.check()
        self.end_block()
        return ToolCall(self._w, name, call_id, metadata)

    def tool_call(self, name: str, input: Any, *, call_id: str | None = None) -> ToolCall:
        """Records a call of tool name with input (any JSON value) at once:
        its block, holding the input as compact JSON, and the call. Run the
        tool, then ``complete`` or ``fail`` it."""
        try:
            arguments = compact_json(input)
        except (TypeError, ValueError) as err:
            raise TypeError(f"Reply.tool_call: input must be JSON-serializable: {err}") from None
        call = self.start_tool_call(name, call_id=call_id)
        call.arguments(arguments)
        call.finish_arguments()
        return call

    def end_all(self) -> None:
        """Ends every open block (the runtime calls it when the handler
        returns): a structured one that is not valid JSON raises
        InvalidOutput, which fails the prompt."""
        self.end_block()
        for block in list(self._open):
            block.end()

    async def flush(self) -> None:
        """Waits until everything written so far is in the database (its
        batch committed). Not needed before returning from the handler."""
        await self._w.sync()
