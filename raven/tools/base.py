"""What a tool is: its name, kind, argument model and `run`; and what it gets and returns."""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Protocol

from pydantic import BaseModel, ConfigDict

from raven.config import Limits
from raven.errors import RavenError
from raven.messages import ImagePart, TokenUsage
from raven.sandbox import Sandbox

ToolKind = Literal["read", "edit", "execute", "fetch", "other"]
StepStatus = Literal["pending", "in_progress", "completed"]


class ToolError(RavenError):
    """The tool could not do what was asked; the message goes back to the model."""


@dataclass(frozen=True)
class Question:
    """A question for the person at the face; `choices` empty means free text."""

    text: str
    choices: tuple[str, ...] = ()
    call_id: str = ""
    """The tool call asking, so a face can attach the question to it."""
    request_id: str = ""
    """Names this asking in the session's log (the engine sets it), for any face that
    answers it from elsewhere."""


@dataclass(frozen=True)
class FileDiff:
    path: Path
    old_text: str | None
    """None for a file the tool created."""
    new_text: str


Preview = FileDiff | str
"""What a call will do, shown to the person approving it: the change it makes to a file,
or the command line and where it runs."""

PREVIEW_LINES = 40
"""At most this many lines of a change are shown where a call is approved."""


def preview_lines(preview: Preview) -> list[str]:
    """A preview as plain lines: the command as given, or a header and a unified diff
    (`+`, `-`, `@@` lines), cut after `PREVIEW_LINES` with a line saying how many more."""
    if isinstance(preview, str):
        return preview.splitlines()
    import difflib

    old = (preview.old_text or "").splitlines()
    new = preview.new_text.splitlines()
    what = "new file" if preview.old_text is None else "change to"
    lines = list(difflib.unified_diff(old, new, lineterm="", n=2))[2:]
    if len(lines) > PREVIEW_LINES:
        lines = [*lines[:PREVIEW_LINES], f"… {len(lines) - PREVIEW_LINES} more lines"]
    return [f"{what} {preview.path}", *lines]


@dataclass(frozen=True)
class PlanStep:
    content: str
    status: StepStatus
    priority: Literal["high", "medium", "low"] = "medium"


@dataclass(frozen=True)
class ToolOutput:
    text: str
    is_error: bool = False
    diff: FileDiff | None = None
    images: tuple[ImagePart, ...] = ()
    """Images for models that accept them in tool results."""
    plan: tuple[PlanStep, ...] | None = None
    """A new plan for the faces to show (update_plan)."""
    usage: TokenUsage | None = None
    """Tokens the call spent on a model of its own (a sub-agent's task)."""


Decision = Literal["allow_once", "allow_always", "reject_once", "reject_always"]
ALL_DECISIONS: tuple[Decision, ...] = ("allow_once", "allow_always", "reject_once", "reject_always")
DECISION_LABELS: dict[Decision, str] = {
    "allow_once": "Allow once",
    "allow_always": "Always allow",
    "reject_once": "Reject",
    "reject_always": "Always reject",
}
"""How every face names the answers to an approval (the editor's options, the web UI's
buttons)."""


@dataclass(frozen=True)
class Permission:
    """What a tool asks approval for, on top of its own call (a sub-agent's tool call, say).

    `key` is what an "always" answer is remembered under; `offered` limits the choices.
    With `person`, only a person may allow it: the session's `auto` policies (its mode's,
    the face's) do not answer for them.
    """

    key: str
    title: str
    kind: ToolKind
    raw_input: dict[str, Any] = field(default_factory=dict)
    offered: tuple[Decision, ...] = ALL_DECISIONS
    preview: Preview | None = None
    person: bool = False


@dataclass(frozen=True)
class ChildText:
    """A sub-agent spoke: the end of all it said (`text`) and what it said since the last
    time (`delta`), each cut where no credential straddles two."""

    agent: str
    text: str
    delta: str
    subagent: str | None = None
    """The session of the sub-agent's own sub-agent that spoke (None: the sub-agent)."""


@dataclass(frozen=True)
class ChildToolCall:
    """A sub-agent's tool call began (`kind` set) or changed."""

    agent: str
    tool_call_id: str
    title: str
    status: str | None
    kind: str | None = None
    subagent: str | None = None
    """The session of the sub-agent's own sub-agent whose call it is (None: its own)."""


@dataclass(frozen=True)
class ChildPlanStep:
    content: str
    status: str


@dataclass(frozen=True)
class ChildPlan:
    """A sub-agent's whole plan, replacing the one before."""

    agent: str
    plan: tuple[ChildPlanStep, ...]
    subagent: str | None = None
    """The session of the sub-agent's own sub-agent whose plan it is (None: its own)."""


@dataclass(frozen=True)
class ChildSubagent:
    """A sub-agent's own sub-agent was announced (`agent` names both: `helper › writer`),
    or changed: its state (running, requires_action, or idle with a stop reason), or
    whether it may be cancelled on its own. None: unchanged."""

    agent: str
    subagent: str
    """Its session, as the sub-agent named it."""
    state: str | None
    stop_reason: str | None = None
    description: str | None = None
    cancellable: bool | None = None


ChildProgress = ChildText | ChildToolCall | ChildPlan | ChildSubagent
"""What a sub-agent did, as the call delegating to it reports it (its progress' detail)."""


@dataclass(frozen=True)
class Progress:
    """What a running tool reports: a line for people, and structured detail for faces."""

    text: str = ""
    detail: ChildProgress | None = None
    step: str | None = None
    """What the tool is doing now, shown after the call's title (a sub-agent's current
    tool call); "" shows the title alone again; None leaves the title as it is."""


def _no_progress(progress: Progress) -> None:
    return None


async def _no_approval(permission: Permission) -> Decision | None:
    return None


@dataclass
class Parts:
    """The parts of a running call's work a person may cancel alone (a delegated agent's
    own sub-agents): the tool sets `cancel`, which the engine calls for a face with the
    part's name; it says whether such a part ran."""

    cancel: Callable[[str], bool] | None = None


@dataclass
class ToolContext:
    cwd: Path
    limits: Limits
    ask: Callable[[Question], Awaitable[str | None]]
    """Asks the person; None when no answer could be had."""
    env: dict[str, str] = field(default_factory=dict)
    session_id: str = ""
    progress: Callable[[Progress], None] = _no_progress
    """Reports progress; faces show it as an update of this tool call."""
    title: str = ""
    """The call's title as the faces show it (known once the call is announced)."""
    approve: Callable[[Permission], Awaitable[Decision | None]] = _no_approval
    """Asks approval through the session's approval path: its mode, its "always" memory;
    None when no one gave an answer (nobody to ask, no answer in time, a policy refused)."""
    parts: Parts = field(default_factory=Parts)
    sandbox: Sandbox = field(default_factory=Sandbox)
    """The sandbox the session's commands run in (`raven.sandbox`)."""

    def resolve(self, path: str) -> Path:
        """A path argument made absolute against the session cwd."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.cwd / p)

    def reach(self, path: str, write: bool = False) -> Path:
        """`path` resolved against the cwd, for a file tool to read (or `write`); a
        `ToolError` when the session's sandbox keeps it out of reach."""
        resolved = self.resolve(path)
        if (why := self.sandbox.refusal(resolved, self.cwd, write)) is not None:
            raise ToolError(f"{path}: not {'written' if write else 'read'}: {why}")
        return resolved

    def inside(self, path: str, refused: str) -> Path:
        """`path` resolved against the cwd, symlinks followed; a `ToolError` ending in `refused`
        ("not sent") when it lands outside the working directory (`..`, absolute, a link out)."""
        resolved = self.resolve(path).resolve()
        if not resolved.is_relative_to(self.cwd.resolve()):
            raise ToolError(f"{path} is outside the working directory; {refused}")
        return resolved


class ToolSource(Protocol):
    """Tools that come from outside the built-ins (MCP servers, sub-agents, for example).

    `tools` may connect lazily and must return within its own deadline; problems
    it meets are returned once each as notices for the person. `release` frees what
    the source keeps for one session (a child process, say); it is called when the
    session closes and when the process shuts down.
    """

    async def tools(self) -> tuple[list[Tool], list[str]]: ...

    async def release(self, session_id: str) -> None: ...


class FixedTools:
    """A tool source offering the same tools to every session, holding nothing for any."""

    def __init__(self, *tools: Tool) -> None:
        self._tools: list[Tool] = list(tools)

    async def tools(self) -> tuple[list[Tool], list[str]]:
        return self._tools, []

    async def release(self, session_id: str) -> None:
        return None


class Args(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class Tool(Protocol):
    """A tool offered to the model. `needs_approval` is False for tools that only read."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    @property
    def kind(self) -> ToolKind: ...

    @property
    def needs_approval(self) -> bool: ...

    @property
    def args_model(self) -> type[BaseModel]: ...

    def parameters(self) -> dict[str, Any]: ...

    def title(self, args: Any, ctx: ToolContext) -> str: ...

    def locations(self, args: Any, ctx: ToolContext) -> list[Path]:
        """The files the call touches. `title` and `locations` may raise `ToolError` to refuse
        a call before anyone is asked to approve it."""
        ...

    async def preview(self, args: Any, ctx: ToolContext) -> Preview | None:
        """What the call will do, for whoever approves it; None when its title says it all.
        Reads nothing it may not read, changes nothing."""
        ...

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput: ...


class BuiltinTool:
    """Shared plumbing for the built-in tools: schema from the args model, no locations."""

    name: ClassVar[str]
    description: ClassVar[str]
    kind: ClassVar[ToolKind]
    needs_approval: ClassVar[bool] = True
    args_model: ClassVar[type[BaseModel]]
    _schema: ClassVar[dict[str, Any] | None] = None

    def parameters(self) -> dict[str, Any]:
        cls = type(self)
        if cls._schema is None:
            cls._schema = _clean_schema(self.args_model.model_json_schema())
        return cls._schema

    def title(self, args: Any, ctx: ToolContext) -> str:
        return self.name

    def locations(self, args: Any, ctx: ToolContext) -> list[Path]:
        return []

    async def preview(self, args: Any, ctx: ToolContext) -> Preview | None:
        return None


def clip(text: str, limit: int) -> str:
    """`text` cut to about `limit` characters, keeping its head and tail."""
    if len(text) <= limit:
        return text
    half = limit // 2
    dropped = len(text) - 2 * half
    return f"{text[:half]}\n… [{dropped} characters omitted] …\n{text[-half:]}"


class Capped:
    """Keeps the first and last bytes of a stream within a character budget, as it is read:
    memory stays bounded whatever a process prints."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._head = bytearray()
        self._tail: collections.deque[bytes] = collections.deque()
        self._tail_len = 0
        self._total = 0

    def add(self, chunk: bytes) -> None:
        self._total += len(chunk)
        room = self._limit - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail.append(chunk)
            self._tail_len += len(chunk)
            while self._tail_len - len(self._tail[0]) >= self._limit:
                self._tail_len -= len(self._tail.popleft())

    def text(self) -> str:
        head = bytes(self._head).decode("utf-8", "replace")
        if not self._tail:
            return head
        tail = b"".join(self._tail)[-self._limit :]
        omitted = self._total - len(self._head) - len(tail)
        marker = f"\n… [{omitted} bytes omitted] …\n" if omitted > 0 else ""
        return clip(head + marker + tail.decode("utf-8", "replace"), self._limit)


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        prop.pop("title", None)
    return schema
