"""What a handler is given: the prompt, its context, a reply writer and a
stop signal."""

from __future__ import annotations

import asyncio
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


def history(blocks: list[ContextBlock]) -> list[Message]:
    """The model's history from the context blocks (in order)."""
    out: list[Message] = []
    start = 0
    while start < len(blocks):
        end = start
        while end < len(blocks) and blocks[end].message_id == blocks[start].message_id:
            end += 1
        message = blocks[start:end]
        start = end
        if message[0].role == "assistant":
            out.extend(_assistant_turns(message))
            continue
        parts = [b.content for b in message if b.block_type in ("text", "structured")]
        if parts:
            out.append(Message(role=message[0].role, text="\n\n".join(parts)))  # type: ignore[arg-type]
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
        return history(self.context + own)

    @property
    def last_user_text(self) -> str:
        """The text of the latest user message: the one being answered."""
        return next((m.text for m in reversed(self.messages) if m.role == "user"), "")
