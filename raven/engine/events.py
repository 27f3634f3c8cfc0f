"""Turn events: what the engine tells a face while a turn runs. Plain data, no protocol."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from raven.engine.asker import ApprovalRequest
from raven.messages import Part
from raven.providers import StopReason
from raven.tools import ChildProgress, FileDiff, PlanStep, Question, ToolKind

ToolStatus = Literal["in_progress", "completed", "failed"]


PARAGRAPH = "\n\n"
"""What leads the text of a model step when an earlier step of the same turn spoke, so the
answer reads "Let me look.\n\nDone looking." wherever it is joined."""


@dataclass(frozen=True)
class AgentText:
    text: str


@dataclass(frozen=True)
class AgentThought:
    text: str


@dataclass(frozen=True)
class ToolCallStarted:
    call_id: str
    tool: str
    title: str
    kind: ToolKind
    raw_input: dict[str, Any]
    locations: list[Path] = field(default_factory=list)


@dataclass(frozen=True)
class ToolCallUpdated:
    """Progress or the end of a tool call.

    At the end, `content` is the text the model receives; while in progress, it is
    the tool's latest progress line and `detail` its structured progress, if any.
    """

    call_id: str
    status: ToolStatus
    content: str | None = None
    diff: FileDiff | None = None
    detail: ChildProgress | None = None
    title: str | None = None
    """The call's title from now on (it follows a sub-agent's steps); None: unchanged."""


@dataclass(frozen=True)
class PlanUpdated:
    """The model's whole plan, replacing the previous one."""

    steps: tuple[PlanStep, ...]


@dataclass(frozen=True)
class UsageUpdated:
    used_tokens: int
    """Tokens in the context after the latest model call."""
    context_window: int | None
    estimated: bool = False
    """The server reported no usage; `used_tokens` is estimated from characters."""
    input_tokens: int | None = None
    """What the latest model call read, as the server counted it (None when estimated)."""
    output_tokens: int | None = None
    """What the latest model call wrote, as the server counted it (None when estimated)."""


@dataclass(frozen=True)
class TitleChanged:
    title: str


@dataclass(frozen=True)
class Notice:
    """An explanation for the person: a failed model call, a refused request."""

    text: str


CompactionStatus = Literal["in_progress", "completed", "failed", "cancelled"]


@dataclass(frozen=True)
class CompactionUpdated:
    """A compaction (`raven.engine.compaction`) began, ended or failed: the older part of
    the session is (being) summarised to stay inside the model's context window. When
    completed, the model sees `summary` and the newest messages from then on; the whole
    transcript stays stored. A failed one changed nothing and says why (`error`)."""

    compaction_id: str
    status: CompactionStatus
    summary: str | None = None
    """The whole summary, once completed."""
    error: str | None = None
    tokens_before: int | None = None
    """The estimated size of what the model was sent before, and (`tokens_after`) after."""
    tokens_after: int | None = None


@dataclass(frozen=True)
class CompactionText:
    """A piece of a running compaction's summary, as the model writes it."""

    compaction_id: str
    text: str


@dataclass(frozen=True)
class TurnEnded:
    stop_reason: StopReason
    error: str | None = None
    """Set when the turn failed; the face shows it and treats the turn as unsuccessful."""


TurnEvent = (
    AgentText
    | AgentThought
    | ToolCallStarted
    | ToolCallUpdated
    | PlanUpdated
    | UsageUpdated
    | TitleChanged
    | Notice
    | CompactionUpdated
    | CompactionText
    | TurnEnded
)

Emit = Callable[[TurnEvent], None]


@dataclass(frozen=True)
class TurnStarted:
    """A turn began on the user's prompt (the parts as given)."""

    parts: tuple[Part, ...]


@dataclass(frozen=True)
class ModeChanged:
    mode_id: str


@dataclass(frozen=True)
class ModelChanged:
    model_id: str


@dataclass(frozen=True)
class SessionEnded:
    """The session was closed; subscribers should let it go."""


@dataclass(frozen=True)
class Asking:
    """The turn waits for a person: an approval (`approval`) or an answer (`question`).
    Any face may answer it (`Runtime.answer`), on any replica, until `Answered`."""

    request_id: str
    approval: ApprovalRequest | None = None
    question: Question | None = None


@dataclass(frozen=True)
class Answered:
    """The asking `request_id` is over: answered, by whichever face, or given up."""

    request_id: str


SessionEvent = (
    TurnStarted
    | TitleChanged
    | ModeChanged
    | ModelChanged
    | TurnEnded
    | SessionEnded
    | Asking
    | Answered
    | CompactionUpdated
    | CompactionText
)
"""What every subscriber of a session hears, whichever face runs its turns."""
