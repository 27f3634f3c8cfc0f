"""ACP v1 wire vocabulary: method names, error codes, the params and results Raven reads,
and the shapes it sends.

Declared once for the server and the client. What Raven reads is parsed here into
pydantic models (unknown keys ignored, as ACP allows); what it sends is typed with
TypedDicts and built by the functions here. Nothing here does I/O.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator
from pydantic.alias_generators import to_camel

from raven.acp.handshake import PROTOCOL_VERSION
from raven.errors import invalid_fields
from raven.jsonrpc import INVALID_PARAMS, RpcError

INITIALIZE = "initialize"
AUTHENTICATE = "authenticate"
SESSION_NEW = "session/new"
SANDBOX_OPTION = "acp.sandbox"
"""The session config option of the ACP sandbox RFD (a draft): the level a client requires."""
SANDBOX_UNSATISFIABLE = "sandbox_policy_unsatisfiable"
SESSION_LOAD = "session/load"
SESSION_RESUME = "session/resume"
SESSION_FORK = "session/fork"
SESSION_LIST = "session/list"
SESSION_CLOSE = "session/close"
SESSION_DELETE = "session/delete"
SESSION_SET_MODE = "session/set_mode"
SESSION_SET_CONFIG_OPTION = "session/set_config_option"
SESSION_PROMPT = "session/prompt"
SESSION_CANCEL = "session/cancel"
SESSION_UPDATE = "session/update"
REQUEST_PERMISSION = "session/request_permission"
ELICITATION_CREATE = "elicitation/create"
ELICITATION_COMPLETE = "elicitation/complete"
RAVEN_STEER = "_raven/session/steer"
SESSION_STEERING = "_session/steering"
"""The steering extension Claude's and Codex's adapters speak: text for the running turn."""

RESOURCE_NOT_FOUND = -32002
AUTH_REQUIRED = -32000


class Wire(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", defer_build=True
    )


class ElicitationCapabilities(Wire):
    form: dict[str, Any] | None = None
    url: dict[str, Any] | None = None


class ClientSessionCapabilities(Wire):
    compaction: dict[str, Any] | None = None
    """Present when the editor shows compactions (`compaction_update`, schema 1.25)."""


class ClientCapabilities(Wire):
    elicitation: ElicitationCapabilities | None = None
    session: ClientSessionCapabilities | None = None
    terminal: bool = False
    subagents: dict[str, Any] | None = None
    """Present when the editor shows sub-agents as child sessions (the ACP subagents
    proposal, as Claude's and Codex's adapters speak it)."""


class InitializeParams(Wire):
    protocol_version: Any = PROTOCOL_VERSION
    client_capabilities: ClientCapabilities = Field(default_factory=ClientCapabilities)


class EnvVariable(Wire):
    name: str
    value: str


class McpServerStdio(Wire):
    name: str
    command: str
    args: list[str] = Field(default_factory=list)
    env: list[EnvVariable] = Field(default_factory=list)


class NewSessionParams(Wire):
    cwd: str
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)


class OpenMeta(Wire):
    after: str | None = None
    """The cursor of the last update the client had (`_meta.raven.cursor` of a
    `session/update`): it gets what came after, exactly once, then what comes."""


class OpenSessionParams(Wire):
    """session/load and session/resume."""

    session_id: str
    cwd: str
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    meta: dict[str, OpenMeta] = Field(default_factory=dict, alias="_meta")

    @field_validator("meta", mode="before")
    @classmethod
    def _raven_only(cls, value: Any) -> Any:
        """Others' `_meta` keys are theirs: only `raven` is read."""
        return {"raven": value["raven"]} if isinstance(value, dict) and "raven" in value else {}

    @property
    def after(self) -> str | None:
        raven = self.meta.get("raven")
        return raven.after if raven is not None else None


class ForkMeta(Wire):
    turns: int | None = Field(default=None, ge=0)
    """Keep only the first `turns` turns of the session forked (Raven's own `_meta`)."""


class ForkSessionParams(Wire):
    session_id: str
    cwd: str
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    meta: dict[str, ForkMeta] = Field(default_factory=dict, alias="_meta")

    @field_validator("meta", mode="before")
    @classmethod
    def _raven_only(cls, value: Any) -> Any:
        """Others' `_meta` keys are theirs: only `raven` is read."""
        return {"raven": value["raven"]} if isinstance(value, dict) and "raven" in value else {}


class ListSessionsParams(Wire):
    cwd: str | None = None
    cursor: str | None = None


class SessionParams(Wire):
    """session/close, session/delete, session/cancel."""

    session_id: str


class SetModeParams(Wire):
    session_id: str
    mode_id: str


class SetConfigOptionParams(Wire):
    session_id: str
    config_id: str
    value: str | bool


class SteerParams(Wire):
    session_id: str
    text: str = Field(min_length=1)


class TextContent(Wire):
    type: Literal["text"]
    text: str


class ImageContent(Wire):
    type: Literal["image"]
    data: str
    mime_type: str


class AudioContent(Wire):
    type: Literal["audio"]
    data: str
    mime_type: str


class ResourceLink(Wire):
    type: Literal["resource_link"]
    uri: str
    name: str
    mime_type: str | None = None
    title: str | None = None
    description: str | None = None


class ResourceContents(Wire):
    uri: str
    text: str | None = None
    blob: str | None = None
    mime_type: str | None = None


class EmbeddedResource(Wire):
    type: Literal["resource"]
    resource: ResourceContents


ContentBlock = Annotated[
    TextContent | ImageContent | AudioContent | ResourceLink | EmbeddedResource,
    Field(discriminator="type"),
]


class PromptParams(Wire):
    session_id: str
    prompt: list[ContentBlock]


class SteeringParams(PromptParams):
    """`_session/steering`: a prompt for the turn in flight (its `_meta.steering.idleBehavior`
    is not read: with no turn running, Raven always answers `promptRequired`)."""


M = TypeVar("M", bound=Wire)


def parse(model: type[M], params: dict[str, Any]) -> M:
    """`params` as `model`, or an invalid-params error naming the offending fields."""
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        problems = invalid_fields(exc, "params")
        raise RpcError(INVALID_PARAMS, f"Invalid params: {problems}") from None


# -- what Raven sends ---------------------------------------------------------------------

ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]
PermissionKind = Literal["allow_once", "allow_always", "reject_once", "reject_always"]


class PermissionOption(TypedDict):
    optionId: str
    name: str
    kind: PermissionKind


class Location(TypedDict):
    path: str


class ToolCallFields(TypedDict, total=False):
    """The fields a `tool_call` update and a permission request's `toolCall` share."""

    toolCallId: str
    title: str
    kind: str
    status: str
    rawInput: dict[str, Any]
    locations: list[Location]
    content: list[dict[str, Any]]


def tool_call(
    call_id: str,
    title: str,
    kind: str | None = None,
    raw_input: dict[str, Any] | None = None,
    locations: Sequence[Path] = (),
) -> ToolCallFields:
    """A tool call as ACP shows it, `pending`; built here for every frame that carries one."""
    fields: ToolCallFields = {"toolCallId": call_id, "title": title}
    if kind is not None:
        fields["kind"] = kind
        fields["status"] = "pending"
    if raw_input is not None:
        fields["rawInput"] = raw_input
    if locations:
        fields["locations"] = [{"path": str(p)} for p in locations]
    return fields


def diff_content(path: Path, old_text: str | None, new_text: str) -> dict[str, Any]:
    """A change to a file as a tool call's content (editors show it as a diff)."""
    return {"type": "diff", "path": str(path), "oldText": old_text, "newText": new_text}


def text_content(text: str) -> dict[str, Any]:
    """Text as a tool call's content."""
    return {"type": "content", "content": {"type": "text", "text": text}}


# -- what Raven reads back ------------------------------------------------------------------


class SelectedOutcome(Wire):
    outcome: Literal["selected"]
    option_id: str


class CancelledOutcome(Wire):
    outcome: Literal["cancelled"]


class RequestPermissionResult(Wire):
    outcome: Annotated[SelectedOutcome | CancelledOutcome, Field(discriminator="outcome")]


class ElicitationResult(Wire):
    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


def read(model: type[M], value: Any) -> M | None:
    """A peer's result as `model`, or None when it does not fit (the caller treats it as "no")."""
    try:
        return model.model_validate(value)
    except ValidationError:
        return None


# -- what Raven reads as a client (of a sub-agent) ------------------------------------------
# Lenient as ACP asks: unknown keys are ignored, and what an agent leaves out takes the
# default Raven shows. Checked against the official SDK's schema (tests/acp/test_protocol.py).


class AgentInfo(Wire):
    name: str | None = None
    title: str | None = None
    version: str | None = None


class InitializeResult(Wire):
    protocol_version: Any = None
    agent_info: AgentInfo | None = None
    agent_capabilities: dict[str, Any] = Field(default_factory=dict)


class NewSessionResult(Wire):
    session_id: str


class ModeInfo(Wire):
    id: str
    name: str = ""
    description: str | None = None


class SessionModes(Wire):
    """The modes an agent declares for a session (the schema's SessionModeState)."""

    current_mode_id: str
    available_modes: list[ModeInfo] = Field(default_factory=list)


class ModeChange(Wire):
    """A `session/update` saying the session's mode changed."""

    session_update: Literal["current_mode_update"]
    current_mode_id: str


class TurnUsage(Wire):
    """What a prompt's turn used, as an agent reports it (the schema's Usage)."""

    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)


class PromptResult(Wire):
    stop_reason: str = "end_turn"
    usage: TurnUsage | None = None

    @field_validator("usage", mode="before")
    @classmethod
    def _usage_if_readable(cls, value: Any) -> Any:
        """An agent's usage Raven cannot read is left out, not a failed task."""
        try:
            return TurnUsage.model_validate(value) if value is not None else None
        except ValueError:
            return None


class OfferedOption(Wire):
    option_id: str
    name: str = ""
    kind: str


class _WhatItDoes(Wire):
    """What a tool call says it does, beyond its label: its input, and the files it names."""

    raw_input: dict[str, Any] | None = None
    locations: list[Any] = Field(default_factory=list)
    content: list[Any] = Field(default_factory=list)

    @field_validator("raw_input", mode="before")
    @classmethod
    def _object_only(cls, value: Any) -> Any:
        return value if isinstance(value, dict) else None

    @field_validator("locations", "content", mode="before")
    @classmethod
    def _list_only(cls, value: Any) -> Any:
        return value if isinstance(value, list) else []

    def paths(self) -> list[str]:
        """The paths its locations and diffs name."""
        named = [*self.locations, *(c for c in self.content if _is_diff(c))]
        return [n["path"] for n in named if isinstance(n, dict) and isinstance(n.get("path"), str)]

    def diff(self) -> Diff | None:
        """The first change to a file it carries (the schema's Diff content)."""
        for item in self.content:
            if _is_diff(item) and (found := read(Diff, item)) is not None:
                return found
        return None


class Diff(Wire):
    path: str
    old_text: str | None = None
    new_text: str


def _is_diff(content: Any) -> bool:
    return isinstance(content, dict) and content.get("type") == "diff"


class ToolCallRef(_WhatItDoes):
    """The tool call a permission request is about (the schema's ToolCallUpdate)."""

    tool_call_id: str = ""
    title: str | None = None
    kind: str | None = None


class PermissionRequest(Wire):
    session_id: str | None = None
    tool_call: ToolCallRef = Field(default_factory=ToolCallRef)
    options: list[OfferedOption] = Field(default_factory=list)


class ElicitationRequest(Wire):
    session_id: str | None = None
    mode: str = "form"
    message: str = ""
    requested_schema: dict[str, Any] = Field(default_factory=dict)
    url: str | None = None
    """The page a consent is given on (url mode)."""
    elicitation_id: str | None = None


class TextChunk(Wire):
    session_update: Literal["agent_message_chunk"]
    content: dict[str, Any] = Field(default_factory=dict)

    @property
    def text(self) -> str | None:
        """The chunk's text; None for an image or other content."""
        if self.content.get("type") != "text":
            return None
        return str(self.content.get("text", ""))


class ToolCallStart(_WhatItDoes):
    session_update: Literal["tool_call"]
    tool_call_id: str = ""
    title: str = "a tool call"
    kind: str = "other"
    status: str = "pending"


class ToolCallChange(Wire):
    session_update: Literal["tool_call_update"]
    tool_call_id: str = ""
    title: str | None = None
    kind: str | None = None
    status: str | None = None


class PlanEntry(Wire):
    content: str = ""
    status: str = "pending"


class Plan(Wire):
    session_update: Literal["plan"]
    entries: list[PlanEntry] = Field(default_factory=list)


class SubagentState(Wire):
    state: str = "running"
    stop_reason: str | None = None


class SubagentUpdate(Wire):
    """A child announcing one of its own sub-agents (ACP's unstable sub-agent sessions)."""

    session_update: Literal["subagent_update"]
    session_id: str
    title: str | None = None
    description: str | None = None
    state: SubagentState | None = None
    capabilities: dict[str, Any] | None = None

    def cancellable(self) -> bool | None:
        """Whether the child may now cancel it on its own; None when this update does not
        say (an update is partial: `capabilities` given as null clears them)."""
        if "capabilities" not in self.model_fields_set:
            return None
        caps = self.capabilities
        return isinstance(caps, dict) and isinstance(caps.get("cancel"), dict)


class SessionMessage(Wire):
    """A message between a child's sessions (ACP's unstable `session_message`): codex gives
    its sub-agents their tasks this way."""

    session_update: Literal["session_message"]
    message_id: str = ""
    sender_session_id: str | None = None
    recipient_session_id: str | None = None
    content: list[dict[str, Any]] | None = None

    def text(self) -> str:
        return "".join(
            str(block.get("text", ""))
            for block in self.content or ()
            if block.get("type") == "text"
        )


ChildUpdate = Annotated[
    TextChunk | ToolCallStart | ToolCallChange | Plan, Field(discriminator="session_update")
]


@functools.cache
def _child_update() -> TypeAdapter[ChildUpdate]:
    return TypeAdapter(ChildUpdate)  # built on first use: `raven acp` as a server never needs it


def read_update(update: Any) -> ChildUpdate | None:
    """A sub-agent's `session/update` payload Raven acts on; None for the kinds it does not
    show (thoughts, usage, commands) and for one it cannot read."""
    try:
        return _child_update().validate_python(update)
    except ValidationError:
        return None
