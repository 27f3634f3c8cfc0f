"""The engine: the model/tools loop, turn events, approvals, modes and the runtime.

Knows no protocol. Faces call `run_turn` with a live session, an asker and an
emit callable, and translate the events they receive.
"""

from raven.engine.asker import (
    Answer,
    AnsweredElsewhere,
    ApprovalRequest,
    Asker,
    Decision,
    Unanswered,
    approval_of,
    until_answered,
)
from raven.engine.errors import (
    BadCursor,
    BadDirectory,
    CursorExpired,
    NoModelConfigured,
    SessionBusy,
    SessionClosed,
    SessionNotFound,
    TurnStuck,
    UnknownMode,
    UnknownModel,
    session_directory,
)
from raven.engine.events import (
    AgentText,
    AgentThought,
    Answered,
    Asking,
    Emit,
    ModeChanged,
    ModelChanged,
    Notice,
    PlanUpdated,
    SessionEnded,
    SessionEvent,
    TitleChanged,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    TurnEvent,
    TurnStarted,
    UsageUpdated,
)
from raven.engine.history import HistoryEvent, history_events
from raven.engine.log import LogEvent, Logged, Snapshot
from raven.engine.runtime import Runtime
from raven.engine.session import LiveSession
from raven.engine.stand_in import Reply, StandIn
from raven.engine.turn import CANCELLED_RESULT, run_turn, start_turn
from raven.messages import shown
from raven.providers import StopReason
from raven.sessions import (
    MATCH_END,
    MATCH_START,
    SearchHit,
    SessionPage,
    SessionRecord,
    StoreUnavailable,
)
from raven.sessions.tasks import SharedTaskRows, TaskFilter, TaskRow, TaskRows, TaskStale
from raven.tools import DECISION_LABELS, FileDiff, Preview, Question, preview_lines

__all__ = [
    "CANCELLED_RESULT",
    "DECISION_LABELS",
    "MATCH_END",
    "MATCH_START",
    "AgentText",
    "AgentThought",
    "Answer",
    "Answered",
    "AnsweredElsewhere",
    "ApprovalRequest",
    "Asker",
    "Asking",
    "BadCursor",
    "BadDirectory",
    "CursorExpired",
    "Decision",
    "Emit",
    "FileDiff",
    "HistoryEvent",
    "LiveSession",
    "LogEvent",
    "Logged",
    "ModeChanged",
    "ModelChanged",
    "NoModelConfigured",
    "Notice",
    "PlanUpdated",
    "Preview",
    "Question",
    "Reply",
    "Runtime",
    "SearchHit",
    "SessionBusy",
    "SessionClosed",
    "SessionEnded",
    "SessionEvent",
    "SessionNotFound",
    "SessionPage",
    "SessionRecord",
    "SharedTaskRows",
    "Snapshot",
    "StandIn",
    "StopReason",
    "StoreUnavailable",
    "TaskFilter",
    "TaskRow",
    "TaskRows",
    "TaskStale",
    "TitleChanged",
    "ToolCallStarted",
    "ToolCallUpdated",
    "TurnEnded",
    "TurnEvent",
    "TurnStarted",
    "TurnStuck",
    "Unanswered",
    "UnknownMode",
    "UnknownModel",
    "UsageUpdated",
    "approval_of",
    "history_events",
    "preview_lines",
    "run_turn",
    "session_directory",
    "shown",
    "start_turn",
    "until_answered",
]
