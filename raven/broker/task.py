"""A broker task: one agent's request of another, its messages, and A2A's state machine.

The states are A2A's (submitted, working, input-required, auth-required, and the four
that never change again: completed, canceled, failed, rejected). Each move names who
makes it, requester or worker, and a move the machine does not allow is refused with
`invalid_transition` (or `task_terminal` once the task has ended). Knows no store, no
process and no transport: what is stored is `encode`'s bytes.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from typing import Literal

from raven.errors import RavenError

State = Literal[
    "submitted",
    "working",
    "input-required",
    "auth-required",
    "completed",
    "canceled",
    "failed",
    "rejected",
]
Role = Literal["requester", "worker"]
TERMINAL: frozenset[str] = frozenset({"completed", "canceled", "failed", "rejected"})
ASKING: frozenset[str] = frozenset({"input-required", "auth-required"})
"""The worker waits on the requester."""

MAX_TEXT_CHARS = 16_000
MAX_HISTORY = 256
"""Messages a task keeps; a send past it is refused (`payload_too_large`)."""
MAX_TASKS_PER_CONTEXT = 128
WAIT_S = 30.0
"""How long `send` and `wait` wait for the counterpart by default."""
MAX_WAIT_S = 120.0

ErrorCode = Literal[
    "unknown_token",
    "unknown_agent",
    "unknown_task",
    "cross_context_denied",
    "not_allowed",
    "invalid_transition",
    "task_terminal",
    "send_cap",
    "chain_budget",
    "no_peers",
    "payload_too_large",
    "invalid_request",
]


class BrokerError(RavenError):
    """A request the broker refuses; `code` names why (the `data.errorCode` on the wire)."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code: ErrorCode = code


@dataclass
class Said:
    by: str
    """The agent that wrote it."""
    text: str
    at_us: int


@dataclass
class BrokerTask:
    id: str
    context_id: str
    """The parent session whose sub-agents these are."""
    requester: str
    worker: str
    state: State
    depth: int
    """1 for a task a delegated agent sent; one more for each task sent while working on
    another (the chain's length, which the budget bounds)."""
    messages: list[Said] = field(default_factory=list)
    created_us: int = 0
    updated_us: int = 0
    key: str = ""
    """What makes a repeat of this send the same send (the dedup window's key)."""

    @property
    def ended(self) -> bool:
        return self.state in TERMINAL

    def role_of(self, agent: str) -> Role | None:
        if agent == self.requester:
            return "requester"
        if agent == self.worker:
            return "worker"
        return None

    def counterpart(self, role: Role) -> str:
        return self.worker if role == "requester" else self.requester

    def add(self, by: str, text: str) -> None:
        if len(self.messages) >= MAX_HISTORY:
            raise BrokerError(
                "payload_too_large", f"task {self.id} holds {MAX_HISTORY} messages already"
            )
        self.messages.append(Said(by, text, now_us()))

    def move(self, role: Role, to: State) -> None:
        """The state becomes `to`, a move `role` may make from here; `BrokerError` if not."""
        if self.ended:
            raise BrokerError("task_terminal", f"task {self.id} is {self.state}; it never changes")
        if to not in _MOVES[role].get(self.state, frozenset()):
            raise BrokerError(
                "invalid_transition",
                f"the {role} cannot move task {self.id} from {self.state} to {to}",
            )
        self.state = to
        self.updated_us = now_us()

    def view(self) -> dict[str, object]:
        """What an agent that is party to the task sees of it."""
        return {
            "taskId": self.id,
            "from": self.requester,
            "to": self.worker,
            "state": self.state,
            "messages": [{"from": m.by, "text": m.text} for m in self.messages],
        }

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, body: bytes) -> BrokerTask:
        raw = json.loads(body)
        raw["messages"] = [Said(**m) for m in raw["messages"]]
        return cls(**raw)


_WORK: frozenset[str] = frozenset({"working", *ASKING, *TERMINAL - {"canceled"}})
_MOVES: dict[Role, dict[str, frozenset[str]]] = {
    # The requester follows up (back to working) or cancels; the worker starts, asks,
    # and ends the task as it finds it. The host moves a woken task to working as its
    # worker would.
    "requester": {
        "submitted": frozenset({"submitted", "canceled"}),
        "working": frozenset({"working", "canceled"}),
        "input-required": frozenset({"working", "canceled"}),
        "auth-required": frozenset({"working", "canceled"}),
    },
    "worker": {
        "submitted": _WORK,
        "working": _WORK,
        "input-required": _WORK,
        "auth-required": _WORK,
    },
}


def now_us() -> int:
    """Now, in microseconds since the epoch (as task rows order by it)."""
    return time.time_ns() // 1000
