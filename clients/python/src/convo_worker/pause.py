"""Resuming a paused reply: the input requests of its tool calls, their
answers, and the end of each call as the Go runtime writes it.

A tool call that waits for a person (``ToolCall.request_input``) parks
its prompt; once answered, a worker claims it again and hands the handler
a Job with ``resumed`` set, the reply so far and ``inputs``, one
InputRequest per call that asked. The handler acts on each answered one
(``InputRequest.resolve``) and goes on with the model, in the same
assistant message (docs/workers-python.md, *Pauses*)."""

from __future__ import annotations

import datetime
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .reply import ToolCall

#: What ``resolve`` runs for an approved call: returns the tool's output
#: (a str), or raises to fail the call.
ToolRunner = Callable[[], "str | Awaitable[str]"]


@dataclass
class InputRequest:
    """One tool call of the reply that asked for input, with its answer: a
    row of ``convo.prompt_inputs``.

    ``status`` is ``pending``, ``answered``, ``expired`` (the server
    answered it with a denial) or ``cancelled``; ``answer`` the answer's
    JSON (``{"approved": true}``, ``{"approved": false, "reason": …}``,
    ``{"output": …}``, ``{"error": …}``, ``{"answer": …}``). ``call`` ends
    the call; ``resolve`` ends it as the answer says."""

    tool_call_id: str
    #: The model's id of the call (the one its next request answers),
    #: from the call's tool_use block; convo's id when it recorded none.
    call_id: str
    name: str
    input: Any
    #: The call's status: ``started`` until someone acts on the answer.
    tool_call_status: str
    kind: str
    request: dict[str, Any]
    status: str
    answer: dict[str, Any] | None
    answered_at: datetime.datetime | None
    expires_at: datetime.datetime | None
    _call: ToolCall | None = field(default=None, repr=False)

    @property
    def actionable(self) -> bool:
        """The call waits for this worker to act: answered (or expired),
        and not ended yet."""
        return self.tool_call_status == "started" and self.status in ("answered", "expired") and (
            self._call is None or self._call.status == "started")

    @property
    def approved(self) -> bool:
        """An approval the user (not the expiry) gave."""
        return self.kind == "approval" and self.status == "answered" and (self.answer or {}).get("approved") is True

    @property
    def denial(self) -> str | None:
        """Why a denied approval was denied, as the Go runtime fails the
        call: ``denied by the user: <reason>`` (or without the reason), or
        ``denied: the request expired``; None unless a denied approval."""
        if self.kind != "approval" or self.approved or self.status not in ("answered", "expired"):
            return None
        reason = (self.answer or {}).get("reason")
        text = "denied" if self.status == "expired" else "denied by the user"
        return f"{text}: {reason}" if isinstance(reason, str) and reason else text

    @property
    def call(self) -> ToolCall:
        """The call, to end yourself: ``complete(output)`` or
        ``fail(error)``, each followed by a ``tool_result`` block (with
        ``inputKind`` in its metadata) at the end of the reply."""
        if self._call is None:
            raise RuntimeError(f"InputRequest.call: tool call {self.tool_call_id} is not this job's to end")
        return self._call

    async def resolve(self, run: ToolRunner | None = None) -> str:
        """Ends the call as its answer says, as the Go runtime does, and
        returns what the model is told (the output, or ``error: …``):

        - approval approved: ``run()`` runs the tool (a str, or an
          awaitable of one), which completes the call; an exception fails
          it (``tool <name> failed: <error>``). Without run: ValueError.
        - approval denied (or expired): fails it with ``denial``.
        - client tool: ``{"output": …}`` completes it, ``{"error": …}``
          fails it; question: the answer completes it.

        Raises ValueError when the call is not waiting for this worker
        (see ``actionable``)."""
        if not self.actionable:
            raise ValueError(f"InputRequest.resolve: tool call {self.call_id} ({self.name}) is {self.tool_call_status}, "
                             f"its request {self.status}: nothing to act on")
        call = self.call
        answer = self.answer or {}
        if self.kind == "approval":
            if not self.approved:
                return _fail(call, self.denial or "denied")
            if run is None:
                raise ValueError(f"InputRequest.resolve: tool call {self.call_id} ({self.name}) was approved: "
                                 "pass run, which runs the tool")
            try:
                result = run()
                output = await result if inspect.isawaitable(result) else result
            except Exception as err:
                return _fail(call, f"tool {self.name} failed: {err}")
            if not isinstance(output, str):
                raise TypeError(f"InputRequest.resolve: run must return a str, got {type(output).__name__}")
            call.complete(output)
            return output
        if self.kind == "client_tool":
            output = answer.get("output")
            if isinstance(output, str):
                call.complete(output)
                return output
            return _fail(call, _text(answer.get("error"), "the client tool failed without saying why"))
        if self.kind == "question":
            text = answer.get("answer")
            if isinstance(text, str):
                call.complete(text)
                return text
            return _fail(call, _text(answer.get("error"), "the question was not answered"))
        raise ValueError(f"InputRequest.resolve: tool call {self.call_id} waited for input of an unknown kind {self.kind!r}")


def _fail(call: ToolCall, error: str) -> str:
    call.fail(error)
    return f"error: {error}"


def _text(value: Any, otherwise: str) -> str:
    return value if isinstance(value, str) and value else otherwise
