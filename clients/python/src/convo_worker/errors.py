"""The exceptions of convo_worker."""

from __future__ import annotations


class ConvoWorkerError(Exception):
    """Base class of the errors this package raises."""


class PromptStopped(ConvoWorkerError):
    """A write to a reply that must stop: the prompt was cancelled, its
    lease lost, the worker is shutting down, or a write of it was refused.
    Nothing more of the reply is written; the handler should return (the
    runtime settles the prompt as ``reason`` says).

    ``reason`` is ``"cancelled"`` (by the user), ``"refused"`` (a write or
    heartbeat of the prompt was refused: its lease was lost, it was
    deleted, or the write was illegal), ``"shutdown"``, ``"settled"``
    (a write after the handler returned), or ``"waiting"`` (a write after
    the prompt was parked to wait for input)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class WriteRefused(ConvoWorkerError):
    """``convo.write_batch`` refused an op of the reply (or a batch could
    not be written). ``sqlstate`` is PostgreSQL's code (``CV001`` not
    found, ``CV002`` illegal state change, ``CV003`` invalid argument, or
    a server error), ``None`` when the connection failed."""

    def __init__(self, what: str, message: str, sqlstate: str | None) -> None:
        super().__init__(f"{what}: {message}")
        self.what = what
        self.message = message
        self.sqlstate = sqlstate


class InvalidOutput(ConvoWorkerError, ValueError):
    """Output that convo cannot store as given: a structured block whose
    text is not valid JSON, say. Raised to the code that wrote it; if the
    handler lets it through, the prompt fails with its message."""
