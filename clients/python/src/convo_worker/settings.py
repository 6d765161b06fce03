"""The settings of a Worker."""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass, field


def default_worker_id() -> str:
    """A name unique to this process: host, pid and a random suffix, as
    the Go runtime names its workers (a restarted process never reuses
    the name of the one before, whose batches are numbered on their own)."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass(frozen=True)
class Settings:
    """How a Worker claims and writes. Every field has a default; values
    out of range raise ValueError naming the field.

    Times are in seconds (floats).
    """

    #: The name the worker claims prompts and writes batches under
    #: (``worker`` of ``convo.claim_prompts`` and ``convo.write_batch``):
    #: unique per process.
    worker_id: str = field(default_factory=default_worker_id)
    #: Replies run at once: the handler runs in up to this many tasks.
    slots: int = 1
    #: Of the slots, how many only take prompts of users who hold nothing
    #: (``reserved`` of ``convo.claim_prompts``; docs/worker-api.md, "Claim
    #: order").
    reserved_slots: int = 0
    #: The worker process's lease (``convo.worker_heartbeat``), which keeps
    #: every prompt it claimed alive: one heartbeat per process every third
    #: of it, on a connection of its own. A worker that dies loses its
    #: prompts when it runs out; one whose heartbeats do not get through
    #: for as long stops its replies in flight.
    lease_seconds: int = 30
    #: Shortest time between two batches of one lane: text streamed
    #: meanwhile to one block is written as one delta. Under load the
    #: pause grows to the last batch's duration. Negative: no pause, and
    #: no coalescing of text.
    batch_interval: float = 0.02
    #: Coalesced text of one reply written at once when this many bytes
    #: (UTF-8) wait.
    batch_bytes: int = 4096
    #: Batches written at once, each on its own connection, each holding
    #: the replies of its share of the conversations.
    lanes: int = 2
    #: Connections for claims, context reads and the few single calls
    #: (besides the lanes' and the listener's).
    db_connections: int = 2
    #: How often an idle worker polls the queue besides LISTEN.
    poll_interval: float = 10.0
    #: Bound of each SQL call (a batch is retried, same number, for up to a
    #: lease).
    call_timeout: float = 15.0
    #: What Worker.serve gives the replies in flight on SIGTERM before it
    #: fails them.
    drain_timeout: float = 20.0
    #: The largest file of a prompt's context whose bytes the runtime reads
    #: for the handler (``PromptFile.data``); a larger one is given
    #: without them. 10 MiB.
    max_file_bytes: int = 10 << 20

    def __post_init__(self) -> None:
        if not isinstance(self.worker_id, str) or not self.worker_id.strip():
            raise ValueError("Settings.worker_id must be a non-empty name")
        _check_int("slots", self.slots, 1, 100_000)
        _check_int("reserved_slots", self.reserved_slots, 0, self.slots)
        _check_int("lease_seconds", self.lease_seconds, 2, 3600)
        _check_number("batch_interval", self.batch_interval, None, 60)
        _check_int("batch_bytes", self.batch_bytes, 1, 64 << 20)
        _check_int("lanes", self.lanes, 1, 64)
        _check_int("db_connections", self.db_connections, 1, 1000)
        _check_number("poll_interval", self.poll_interval, 0.01, 3600)
        _check_number("call_timeout", self.call_timeout, 0.1, 3600)
        _check_number("drain_timeout", self.drain_timeout, 0, 86_400)
        _check_int("max_file_bytes", self.max_file_bytes, 0, 1 << 30)

    @property
    def heartbeat_interval(self) -> float:
        """How often the process lease is extended: a third of it."""
        return self.lease_seconds / 3


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"Settings.{name} must be an integer from {low} to {high}, got {value!r}")


def _check_number(name: str, value: object, low: float | None, high: float) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value != value:
        raise ValueError(f"Settings.{name} must be a number of seconds, got {value!r}")
    if (low is not None and value < low) or value > high:
        bounds = f"from {low} to {high}" if low is not None else f"at most {high}"
        raise ValueError(f"Settings.{name} must be {bounds} seconds, got {value!r}")
