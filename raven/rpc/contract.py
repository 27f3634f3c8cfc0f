"""Raven RPC: the methods, notifications and errors the gateway serves, declared once.

These pydantic models are the contract. `openrpc_document()` builds
`rpc-schema/openrpc.json` from them and the events' schema (and `web_module()` what the
web UI takes from it); the gateway parses every request with them and the Python client
every answer, so the document and the code cannot drift apart. Pure declarations.
"""

from __future__ import annotations

import json
from enum import IntEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from raven import __version__
from raven.jsonrpc import errors as jsonrpc
from raven.tools.base import DECISION_LABELS, Decision, ToolKind

RPC_VERSION = "2.3.0"


class Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid")


class Empty(Wire):
    pass


# -- shapes ---------------------------------------------------------------------------------


class SessionInfo(Wire):
    session_id: str
    cwd: str
    title: str
    mode: str | None
    model: str | None
    face: str
    created_at: str
    updated_at: str
    closed: bool
    busy: bool = False
    """A turn runs in it (in this gateway)."""
    waiting: int = 0
    """Permission requests and questions its turn waits for (in this gateway)."""
    failure: str | None = None
    """The error its last turn ended with; null when that turn ended well."""


class Hello(Wire):
    name: Literal["raven"] = "raven"
    version: str = __version__
    rpc_version: str = RPC_VERSION
    cwd: str = Field(description="The gateway's working directory: a default for new sessions")
    home: str | None = Field(
        default=None, description="The gateway user's home directory, which pages may show as ~"
    )


class SessionCreate(Wire):
    cwd: str = Field(description="Absolute path of an existing directory")
    model: str | None = None
    mode: str | None = None


class SessionRef(Wire):
    session_id: str


class SessionList(Wire):
    cwd: str | None = None
    cursor: str | None = None
    limit: int = Field(default=50, ge=1, le=200)
    query: str | None = Field(default=None, description="A piece of the title or directory")


class SessionPageResult(Wire):
    sessions: list[SessionInfo]
    next_cursor: str | None = None


class SessionGet(Wire):
    session_id: str
    history_limit: int = Field(default=500, ge=0, le=5000)
    """How many of the newest messages of the transcript older than the session's log to
    return as events (the log's own events always come whole)."""


class SessionSubscribe(Wire):
    session_id: str
    after: str | None = Field(
        default=None,
        description="A cursor from `session.get` or a `session.event`: the events after it "
        "are sent first, then live ones, with none missed or repeated. Without it, events "
        "from now on. Error -32004 when the session's log no longer holds them.",
    )


class Spent(Wire):
    """What one spender (a model, a sub-agent) used in a session."""

    input_tokens: int
    output_tokens: int
    calls: int
    estimated_calls: int = Field(description="Calls whose server reported no usage (estimated)")


class SessionUsage(Wire):
    """Tokens a session used, as `raven sessions show --json` gives them."""

    models: dict[str, Spent] = Field(description="By model id")
    agents: dict[str, Spent] = Field(description="By sub-agent, what its tasks reported")
    cost_usd: float | None = Field(
        default=None, description="From the models' configured prices; null when none has one"
    )


EVENT: dict[str, Any] = {"x-raven": "event"}
"""Marks where an event goes (`raven.events/1`); `openrpc_document` puts the events' own
schema there."""


class SessionDetail(Wire):
    session: SessionInfo
    history: list[Annotated[dict[str, Any], Field(json_schema_extra=EVENT)]]
    """The session as events, in order, as `session.event` carries them: the older
    transcript (its newest `historyLimit` messages) replayed, then the session's log,
    which holds the recent turns whole, the running one included."""
    cursor: str | None = None
    """Where `history` ends: `session.subscribe` with `after` set to it continues right
    there. None for a closed session."""
    pending: list[dict[str, Any]] = Field(default_factory=list)
    """Permission requests and questions still waiting for an answer, as they were announced
    (`permission.requested` / `question.asked` params, with `method`)."""
    usage: SessionUsage | None = None
    """What the whole session used so far (None before any model call)."""
    project_instructions: list[str] = Field(default_factory=list)
    """The project instructions its turns read (`AGENTS.md` and the like), relative to its
    directory, root first; empty for a closed session."""
    sandbox: str = ""
    """The sandbox its commands run in and whether this machine holds it ("workspace:
    enforced by Landlock version 7"); empty when off, and for a closed session."""


class SessionRename(Wire):
    session_id: str
    title: str = Field(min_length=1)


class Compacted(Wire):
    status: Literal["completed", "failed"]
    summary: str | None = None
    """What the model sees from now on in place of the older messages."""
    error: str | None = None
    tokens_before: int | None = None
    tokens_after: int | None = None


class SessionSetMode(Wire):
    session_id: str
    mode: str


class SessionSetModel(Wire):
    session_id: str
    model: str


class TurnSend(Wire):
    session_id: str
    text: str = Field(min_length=1)


class TurnSteer(Wire):
    session_id: str
    text: str = Field(min_length=1)


class Steered(Wire):
    steered: bool
    """False when no turn was running."""


class Accepted(Wire):
    accepted: bool = True


class PermissionRespond(Wire):
    request_id: str
    decision: Decision


class QuestionRespond(Wire):
    request_id: str
    answer: str | None = None
    """None (or absent) means no answer."""


class ModelInfo(Wire):
    id: str
    name: str
    provider: str


class ModelsResult(Wire):
    models: list[ModelInfo]
    default: str | None
    offline: str = Field(
        description="The model that works with nothing configured: it answers with what it "
        "was sent (for trying Raven before a model is set up)"
    )


class ModeInfo(Wire):
    id: str
    name: str
    description: str | None = None
    approvals: str


class ModesResult(Wire):
    modes: list[ModeInfo]
    default: str | None


class AgentInfo(Wire):
    name: str
    description: str
    protocol: str
    permissions: str


class AgentsResult(Wire):
    agents: list[AgentInfo]


class DirectoryList(Wire):
    path: str = Field(description="Absolute path of an existing directory")


class DirectoryListing(Wire):
    path: str
    """The directory, absolute, symbolic links resolved."""
    parent: str | None
    """The directory above it; null at the root."""
    directories: list[str]
    """The names of its subdirectories, sorted, hidden ones (a leading dot) left out."""
    truncated: bool = False
    """More subdirectories than a listing holds (`MAX_LISTED_DIRECTORIES`)."""


MAX_LISTED_DIRECTORIES = 500


class A2AStatus(Wire):
    enabled: bool
    mounted: bool
    path: str


# -- notifications --------------------------------------------------------------------------


class SessionEventNote(Wire):
    session_id: str
    cursor: str = Field(description="Resume right after this event: `session.subscribe` `after`")
    event: dict[str, Any] = Field(
        json_schema_extra=EVENT,
        description="An event as `raven run --output jsonl` prints it (raven.events/1): a "
        "turn's events (whichever face runs the turn), and TurnStarted, ModeChanged, "
        "ModelChanged, SessionEnded, Asking and Answered (a turn waits for a person, "
        "and no longer does; the UI is asked through permission.requested and "
        "question.asked)",
    )


class DiffPreview(Wire):
    path: str
    old_text: str | None = Field(default=None, description="None for a file the call creates")
    new_text: str


class PermissionRequested(Wire):
    request_id: str
    session_id: str
    call_id: str
    title: str
    kind: ToolKind
    raw_input: dict[str, Any]
    offered: list[Decision]
    preview_diff: DiffPreview | None = Field(
        default=None, description="The change the call makes to a file, to show as a diff"
    )
    preview_text: str | None = Field(
        default=None, description="What the call will do otherwise: the command and where"
    )


class QuestionAsked(Wire):
    request_id: str
    session_id: str
    text: str
    choices: list[str]


class RequestSettled(Wire):
    request_id: str
    """A permission or question was answered (by any UI) or withdrawn."""


# -- the tables -----------------------------------------------------------------------------

METHODS: dict[str, tuple[type[Wire], type[Wire], str]] = {
    "system.hello": (Empty, Hello, "Who serves: Raven's version and the RPC version."),
    "session.create": (SessionCreate, SessionInfo, "A new session in a directory."),
    "session.list": (
        SessionList,
        SessionPageResult,
        "Sessions, newest first, paged (not those a sub-agent Raven keeps for its parent's tasks).",
    ),
    "session.get": (SessionGet, SessionDetail, "A session and its events so far, with a cursor."),
    "session.delete": (SessionRef, Accepted, "Delete a session and its transcript."),
    "session.close": (SessionRef, Accepted, "Close a session (its transcript is kept)."),
    "session.rename": (SessionRename, SessionInfo, "Give a session a new title."),
    "session.setMode": (SessionSetMode, SessionInfo, "Switch the mode for the next turn."),
    "session.compact": (
        SessionRef,
        Compacted,
        "Summarise the session's older messages now, as it does near the model's context "
        "window; subscribers get the compaction's events. Error -32600 while a turn runs "
        "or when there is nothing older than the last turn to summarise.",
    ),
    "session.setModel": (SessionSetModel, SessionInfo, "Switch the model for the next turn."),
    "session.subscribe": (
        SessionSubscribe,
        Accepted,
        "Receive the session's events on this socket, from a cursor or from now.",
    ),
    "session.unsubscribe": (SessionRef, Accepted, "Stop receiving the session's events."),
    "turn.send": (TurnSend, Accepted, "Start a turn; its events arrive as notifications."),
    "turn.cancel": (SessionRef, Accepted, "Cancel the running turn."),
    "turn.steer": (TurnSteer, Steered, "Give the running turn more to consider."),
    "permission.respond": (PermissionRespond, Accepted, "Answer a permission request."),
    "question.respond": (QuestionRespond, Accepted, "Answer a question."),
    "models.list": (Empty, ModelsResult, "The models sessions can use."),
    "modes.list": (Empty, ModesResult, "The modes sessions can switch between."),
    "agents.list": (Empty, AgentsResult, "The sub-agents `delegate` can use."),
    "a2a.status": (Empty, A2AStatus, "Whether A2A is enabled and mounted here."),
    "directory.list": (
        DirectoryList,
        DirectoryListing,
        "The subdirectories of a directory on the gateway's machine, to choose where a "
        "session works.",
    ),
}

NOTIFICATIONS: dict[str, tuple[type[Wire], str]] = {
    "session.event": (SessionEventNote, "The next event of a subscribed session, in order."),
    "permission.requested": (
        PermissionRequested,
        "A tool call waits for approval (to every UI; with replicas, a turn on another "
        "replica's too, for the sessions a UI here follows).",
    ),
    "question.asked": (
        QuestionAsked,
        "The model asks the person something (to every UI; with replicas, as "
        "permission.requested).",
    ),
    "request.settled": (RequestSettled, "A permission or question needs no answer anymore."),
}


class Code(IntEnum):
    """The error codes of Raven RPC, by name (the web UI gets them in `contract.js`)."""

    PARSE_ERROR = jsonrpc.PARSE_ERROR
    INVALID_REQUEST = jsonrpc.INVALID_REQUEST
    METHOD_NOT_FOUND = jsonrpc.METHOD_NOT_FOUND
    INVALID_PARAMS = jsonrpc.INVALID_PARAMS
    INTERNAL_ERROR = jsonrpc.INTERNAL_ERROR
    SESSION_NOT_FOUND = -32002
    REQUEST_NOT_FOUND = -32003
    CURSOR_EXPIRED = -32004


ERRORS: dict[Code, str] = {
    Code.PARSE_ERROR: "Parse error: the frame is not JSON",
    Code.INVALID_REQUEST: "Invalid request (also: a turn already runs, or the session is closed)",
    Code.METHOD_NOT_FOUND: "Method not found",
    Code.INVALID_PARAMS: "Invalid params (also: unknown model or mode, a bad cwd)",
    Code.INTERNAL_ERROR: "Internal error (details in the gateway's log)",
    Code.SESSION_NOT_FOUND: "Session not found",
    Code.REQUEST_NOT_FOUND: "Request not found: that permission or question was already settled",
    Code.CURSOR_EXPIRED: "Cursor expired: the session's log no longer holds what follows it; "
    "call session.get again",
}


def openrpc_document(events: dict[str, Any]) -> dict[str, Any]:
    """The OpenRPC 1.x document of Raven RPC, from the models above; `events` is the
    schema of the events it carries (`raven.engine.codec.events_schema()`, which the
    contract cannot import)."""
    methods = []
    for name, (params, result, summary) in METHODS.items():
        schema = params.model_json_schema(by_alias=True)
        required = set(schema.get("required", []))
        methods.append(
            {
                "name": name,
                "summary": summary,
                "paramStructure": "by-name",
                "params": [
                    {"name": key, "required": key in required, "schema": prop}
                    for key, prop in schema.get("properties", {}).items()
                ],
                "result": {"name": result.__name__, "schema": _schema(result)},
            }
        )
    document = {
        "openrpc": "1.3.2",
        "info": {"title": "Raven RPC", "version": RPC_VERSION},
        "servers": [{"name": "gateway", "url": "ws://127.0.0.1:8700/rpc"}],
        "methods": methods,
        "x-notifications": [
            {"name": name, "summary": summary, "params": _schema(model)}
            for name, (model, summary) in NOTIFICATIONS.items()
        ],
        "x-errors": [{"code": int(code), "message": text} for code, text in ERRORS.items()],
        "components": {"schemas": {"Event": _referable(events)}},
    }
    return _events_referred(document)


def _referable(events: dict[str, Any]) -> dict[str, Any]:
    """The events' schema as a component: its `$defs` referred to where it now stands."""
    text = json.dumps({k: v for k, v in events.items() if k not in ("$schema", "$id")})
    return json.loads(text.replace('"#/$defs/', '"#/components/schemas/Event/$defs/'))


def _events_referred(node: Any) -> Any:
    """`node` with every place `EVENT` marks referring to the events' schema."""
    if isinstance(node, dict):
        if node.get("x-raven") == EVENT["x-raven"]:
            kept = {k: v for k, v in node.items() if k == "description"}
            return {"$ref": "#/components/schemas/Event", **kept}
        return {k: _events_referred(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_events_referred(v) for v in node]
    return node


def _schema(model: type[Wire]) -> dict[str, Any]:
    return model.model_json_schema(by_alias=True, ref_template="#/$defs/{model}")


def markdown_reference(doc: dict[str, Any]) -> str:
    """docs/rpc.md: the document above (`openrpc_document`), for people."""
    lines = [
        "# Raven RPC reference",
        "",
        f"Generated from `rpc-schema/openrpc.json` (Raven RPC {RPC_VERSION}); do not edit.",
        "JSON-RPC 2.0 over a WebSocket at `/rpc` on the gateway; see [gateway.md](gateway.md).",
        "",
        "## Methods",
    ]
    for method in doc["methods"]:
        lines += ["", f"### `{method['name']}`", "", method["summary"], ""]
        if method["params"]:
            lines.append("| param | required | type |")
            lines.append("|---|---|---|")
            for param in method["params"]:
                kind = param["schema"].get("type") or "see schema"
                required = "yes" if param["required"] else "no"
                lines.append(f"| `{param['name']}` | {required} | {kind} |")
        else:
            lines.append("No params.")
        lines += ["", f"Result: `{method['result']['name']}`."]
    lines += ["", "## Notifications", ""]
    for note in doc["x-notifications"]:
        fields = ", ".join(f"`{k}`" for k in note["params"].get("properties", {}))
        lines.append(f"- `{note['name']}`: {note['summary']} Fields: {fields}.")
    lines += ["", "## Errors", "", "| code | meaning |", "|---|---|"]
    lines += [f"| {e['code']} | {e['message']} |" for e in doc["x-errors"]]
    return "\n".join(lines) + "\n"


def web_module() -> str:
    """raven/web/files/contract.js: the error codes by name and the approval answers'
    labels, for the web UI."""
    lines = [
        f"// Raven RPC {RPC_VERSION}, from raven/rpc/contract.py; do not edit.",
        "export const CODES = Object.freeze({",
        *(f"  {code.name}: {int(code)}," for code in Code),
        "});",
        "export const DECISIONS = Object.freeze({",
        *(f'  {decision}: "{label}",' for decision, label in DECISION_LABELS.items()),
        "});",
    ]
    return "\n".join(lines) + "\n"
