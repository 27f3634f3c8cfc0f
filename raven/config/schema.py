"""The config schema: pydantic models with camelCase JSON keys; unknown keys are errors.

Declares shapes and cross-key rules only; never touches the file system.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from raven.origins import BadOrigin, origin_of, parse_origin

ECHO_MODEL_ID = "echo"


def _public_url(value: str | None) -> str | None:
    """A base URL people or peers reach Raven at, without its trailing slash."""
    if value is None:
        return None
    try:
        origin_of(value)
    except BadOrigin as exc:
        raise ValueError(str(exc)) from None
    return value.rstrip("/")


PublicUrl = Annotated[str | None, AfterValidator(_public_url)]

ProviderName = Literal["openai", "anthropic", "scripted"]
ApprovalPolicy = Literal["ask", "auto", "deny"]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class PromptFile(_Model):
    file: str = Field(min_length=1)
    """A text file, relative to the config file."""


SystemPrompt = str | PromptFile
"""Replaces Raven's system prompt; `{cwd}` and `{date}` in it are filled in."""


class ModelPrices(_Model):
    """What a model's tokens cost, in dollars per million."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class ModelSpec(_Model):
    id: str = Field(min_length=1)
    name: str | None = None
    provider: ProviderName
    model: str | None = None
    """The vendor's model name; defaults to `id`."""
    base_url: str | None = None
    api_key_env: str | None = None
    api_key: str | None = None
    script: str | None = None
    """Scripted provider only: path to a JSON list of steps."""
    max_tokens: int | None = Field(default=None, gt=0)
    context_window: int | None = Field(default=None, gt=0)
    system_prompt: SystemPrompt | None = None
    prices: ModelPrices | None = None
    """For the cost `raven run -u` and `raven sessions show` add up."""

    @property
    def display_name(self) -> str:
        return self.name or self.id

    @property
    def vendor_model(self) -> str:
        return self.model or self.id


class ToolFilter(_Model):
    allow: list[str] | None = None
    """Glob patterns of tool names offered in this mode; absent means all."""
    deny: list[str] = Field(default_factory=list)


SandboxLevel = Literal["off", "workspace", "strict"]


class ModeSpec(_Model):
    id: str = Field(min_length=1)
    name: str
    description: str | None = None
    approvals: ApprovalPolicy = "ask"
    tools: ToolFilter = Field(default_factory=ToolFilter)
    system_prompt: SystemPrompt | None = None
    """Beats the model's `systemPrompt`."""
    sandbox: SandboxLevel | None = None
    """The sandbox this mode requires for commands: where the kernel cannot hold it, its
    commands are refused rather than run outside it. None: the config's `sandbox`."""


class McpStdioServer(_Model):
    """An MCP server Raven starts as a child process and talks to over stdio."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    enabled: bool = True
    tools: ToolFilter = Field(default_factory=ToolFilter)
    timeout_s: float = Field(default=30.0, gt=0)
    """Longest wait for the server's handshake and tool list."""
    sandbox: SandboxLevel | None = None
    """The sandbox Raven starts the server in (`raven.sandbox`), required: where the kernel
    cannot hold it, the server is not started. None: none of Raven's."""


class McpHttpServer(_Model):
    """An MCP server reached over streamable HTTP."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    url: str = Field(pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    enabled: bool = True
    tools: ToolFilter = Field(default_factory=ToolFilter)
    timeout_s: float = Field(default=30.0, gt=0)


def _mcp_kind(value: Any) -> str:
    if isinstance(value, dict):
        return "http" if "url" in value else "stdio"
    return "http" if isinstance(value, McpHttpServer) else "stdio"


McpServerSpec = Annotated[
    Annotated[McpStdioServer, Tag("stdio")] | Annotated[McpHttpServer, Tag("http")],
    Discriminator(_mcp_kind),
]


SubAgentKind = Literal[
    "read", "edit", "delete", "move", "search", "execute", "think", "fetch", "switch_mode", "other"
]
"""The kinds of tool call an ACP agent reports."""


class AgentRule(_Model):
    """One rule on a sub-agent's permission requests: when every condition given holds
    (none given: always), `action` is taken. Judged on what the request does."""

    kind: list[SubAgentKind] | None = None
    """The kinds it applies to, as Raven judges the request (a "read" that runs a command
    is `execute`)."""
    paths: Literal["inside", "outside"] | None = None
    """`inside`: it touches paths, all within the working directory; `outside`: at
    least one path beyond it."""
    commands: list[str] | None = None
    """It runs one of these programs (by name), with no shell operators (`;`, `&&`, `|`,
    redirections, substitutions) that could run another."""
    action: Literal["allow", "reject", "escalate"]
    """`escalate` asks the person in the parent's face; no answer rejects."""


class AgentSpec(_Model):
    """A local sub-agent Raven launches and drives unattended."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    protocol: Literal["acp", "cli", "a2a-stdio"] = "acp"
    """`acp`: an ACP agent over stdio (`delegate`); `cli`: a one-shot command (`{task}` in
    args, or stdin); `a2a-stdio`: an A2A agent over stdio (`raven a2a stdio`, say), asked
    with `a2a_send` by its name and kept running for the session."""
    command: str = Field(min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    permissions: Literal["auto", "auto-once", "read-only", "ask"] = "auto"
    """What happens to a permission request no rule of `rules` decides."""
    rules: list[AgentRule] = Field(default_factory=list)
    """Checked in order before `permissions`; the first that applies decides."""
    isolation: Literal["none", "worktree"] = "none"
    """`worktree`: each task runs in a fresh git worktree on a branch of its own, left for
    the person to merge or discard."""
    mode: str | None = None
    """The session mode (one the agent declares) Raven keeps it in. Unset: the declared
    mode that asks before every edit and command (`default`, `read-only`, `ask`); an agent
    declaring modes and none of these is refused."""
    sandbox: SandboxLevel | None = None
    """The sandbox Raven starts the agent's process in (`raven.sandbox`), required: where
    the kernel cannot hold it, the agent is not started. None: none of Raven's."""
    ready_timeout_s: float = Field(default=30.0, gt=0)
    prompt_timeout_s: float = Field(default=600.0, gt=0)
    enabled: bool = True
    peers: list[str] | None = None
    """The agents it may ask for work through the broker (`raven.broker`); None: every
    other configured agent; []: none (it is given no `a2a` tool)."""

    @property
    def over_a2a(self) -> bool:
        """An A2A agent over stdio: asked with `a2a_send`, never delegated to."""
        return self.protocol == "a2a-stdio"


class GatewayConfig(_Model):
    host: str = "127.0.0.1"
    port: int = Field(default=8700, ge=0, le=65535)
    allow_remote: bool = False
    public_url: PublicUrl = None
    """Where browsers reach the gateway when that is not its own address (a load balancer
    in front of replicas, TLS termination): requests naming that host are accepted too."""


class A2APushConfig(_Model):
    """Push notifications: where they may go and how hard Raven tries."""

    allow_private: list[str] = Field(default_factory=list)
    """Hosts (`localhost`, `hooks.lan`) or networks (`10.0.0.0/8`, `127.0.0.1/32`) push
    may reach though they are not public addresses; everything else must be."""
    timeout_s: float = Field(default=10.0, gt=0)
    """One delivery attempt: connecting, sending and the receiver's answer."""
    attempts: int = Field(default=5, ge=1)
    """Tries per notification, with exponential backoff and jitter between them."""
    retry_base_s: float = Field(default=1.0, gt=0)
    retry_max_s: float = Field(default=60.0, gt=0)
    disable_after: int = Field(default=3, ge=1)
    """Notifications in a row that failed every attempt before the config is disabled."""
    max_body_bytes: int = Field(default=1024 * 1024, ge=1024)
    """The largest notification; a larger one is sent as the task's status alone."""


class A2AServerConfig(_Model):
    @model_validator(mode="before")
    @classmethod
    def _forget_lease(cls, data: Any) -> Any:
        """`leaseS` went with the task store of its own: a task's turn is its session's,
        claimed for the sessions' `leaseS`. A config that still has it loads."""
        if isinstance(data, dict):
            data = {k: v for k, v in data.items() if k not in ("leaseS", "lease_s")}
        return data

    enabled: bool = False
    """Mount the A2A routes on the gateway (`raven a2a serve` needs only the token)."""
    token: str = ""
    path: str = Field(default="/a2a", pattern=r"^/[A-Za-z0-9/_.-]*$")
    host: str = "127.0.0.1"
    port: int = Field(default=8710, ge=0, le=65535)
    grpc_port: int | None = Field(default=None, ge=0, le=65535)
    """`raven a2a serve` also serves the gRPC binding on this port (0: any free one); needs
    the `grpc` extra."""
    task_store: str = "memory"
    """`memory`, or `sessions`: beside the sessions in their store (raven.db, or the
    PostgreSQL database of `sessions.url`). `sqlite` and a database URL, from before tasks
    moved there, are read as `sessions`."""
    keep_finished_tasks: int = Field(default=10_000, ge=1)
    """Finished tasks the `memory` store keeps (the oldest are forgotten first)."""
    max_concurrent_tasks: int = Field(default=4, ge=1)
    max_queued_tasks: int = Field(default=32, ge=0)
    max_queued_per_context: int = Field(default=8, ge=0)
    """Tasks of one conversation waiting behind its running task; more are rejected."""
    approvals: ApprovalPolicy = "ask"
    agents: list[str] = Field(default_factory=list)
    """Configured agents (`agents`, by name) served over A2A beside Raven, each at a path
    of its own under `path` (`raven a2a serve --agent NAME` serves them instead)."""

    def agent_path(self, name: str) -> str:
        """Where the configured agent `name` is served: `<path>/agents/NAME`."""
        return f"{self.path.rstrip('/')}/agents/{name}"

    cwd: str | None = None
    """Working directory of inbound sessions; default `<data dir>/a2a-work`."""
    input_timeout_s: float = Field(default=300.0, gt=0)
    """How long a task waits in input-required before its question gets "no answer", and
    at most for its turn (a slot, then its conversation's other turn) before it fails."""
    max_body_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    max_file_bytes: int = Field(default=20 * 1024 * 1024, ge=1)
    """Largest file a peer may send inline (and `attach_file` may return)."""
    file_media_types: list[str] = Field(default_factory=lambda: ["*/*"])
    """Media types of files peers may send (glob patterns)."""
    push: A2APushConfig = Field(default_factory=A2APushConfig)
    public_url: PublicUrl = None
    """Base URL peers use to reach this server (e.g. behind TLS termination); the card
    advertises it plus `path`. Without it, the listener's own address."""


class A2APeer(_Model):
    """A credential for one remote A2A origin, sent only to that origin."""

    origin: str
    auth_scheme: Literal["bearer"] = "bearer"
    credential: str = Field(min_length=1)

    @field_validator("origin")
    @classmethod
    def _valid_origin(cls, value: str) -> str:
        try:
            parse_origin(value)
        except BadOrigin as exc:
            raise ValueError(str(exc)) from None
        return value


class A2AClientConfig(_Model):
    timeout_s: float = Field(default=300.0, gt=0)
    max_response_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)
    max_file_bytes: int = Field(default=20 * 1024 * 1024, ge=1)
    """Largest file `a2a_send` sends, or saves from a peer's reply."""


class A2AConfig(_Model):
    server: A2AServerConfig = Field(default_factory=A2AServerConfig)
    peers: list[A2APeer] = Field(default_factory=list)
    client: A2AClientConfig = Field(default_factory=A2AClientConfig)


class SessionsConfig(_Model):
    """Where sessions live: SQLite in the data directory, or a PostgreSQL server that
    replicas share."""

    url: str | None = None
    """`postgresql://user@host:port/db` (needs the `postgresql` extra); None: SQLite."""
    lease_s: float = Field(default=15.0, ge=1.0)
    """With PostgreSQL: how long a turn's claim on its session lasts unless its replica
    renews it (every third of it); a lapsed turn ends failed."""
    listen: bool = True
    """With PostgreSQL: hear other replicas' changes through LISTEN/NOTIFY; false polls
    every `pollS` instead (for a pooler that cannot LISTEN, such as PgBouncer in
    transaction mode)."""
    poll_s: float = Field(default=0.25, gt=0)
    """With PostgreSQL and `listen` false: how often a replica looks for changes."""

    @field_validator("url")
    @classmethod
    def _postgresql(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("postgresql://", "postgres://")):
            raise ValueError("must be a postgresql:// URL (or leave it out for SQLite)")
        return value


class Limits(_Model):
    max_turn_steps: int = Field(default=50, gt=0)
    """Model calls in one turn before it ends with `max_turn_requests`."""
    command_timeout_s: float = Field(default=120.0, gt=0)
    tool_output_chars: int = Field(default=30_000, ge=1_000)
    detached_turn_s: float = Field(default=300.0, ge=0)
    """How long a turn a remote ACP editor started goes on once no editor follows its
    session (the connection dropped): one that reconnects in time resumes it by cursor."""
    model_timeout_s: float = Field(default=300.0, gt=0)
    """Longest silence tolerated from a model stream."""
    question_timeout_s: float = Field(default=600.0, gt=0)
    """How long a turn waits for a person's approval or answer."""
    idle_session_s: float = Field(default=60.0, ge=0)
    """How long a served session (the gateway's) stays in memory once no UI follows it
    and no turn runs in it; a UI back within it resumes from its cursor."""


class CompactionConfig(_Model):
    """When and how a long session is summarised to stay inside its model's context
    window (`raven.engine.compaction`)."""

    auto: bool = True
    """Compact before a model call whose request would pass `threshold` of the window."""
    threshold: float = Field(default=0.8, gt=0, le=1)
    """The share of the model's context window a request may fill before compacting."""
    keep: float = Field(default=0.25, ge=0, lt=1)
    """The share of the window the newest messages, kept as they are, may fill."""
    model: str | None = None
    """The model that writes the summary (a cheaper one, say); None: the session's."""


class BrokerConfig(_Model):
    """The local broker through which sub-agents ask each other for work (`raven.broker`)."""

    enabled: bool = True
    max_depth: int = Field(default=3, ge=1)
    """The longest chain of tasks each sent while working on the one before."""
    max_sends: int = Field(default=200, ge=1)
    """Messages the sub-agents of one session may send in one run of Raven."""
    dedup_s: float = Field(default=600.0, ge=0)
    """A send repeated (same sender, addressee and text) within this is the task already
    sent, not a new one."""


class RavenConfig(_Model):
    models: list[ModelSpec] = Field(default_factory=list)
    default_model: str | None = None
    modes: list[ModeSpec] = Field(default_factory=list)
    default_mode: str | None = None
    limits: Limits = Field(default_factory=Limits)
    compaction: CompactionConfig = Field(default_factory=CompactionConfig)
    mcp_servers: list[McpServerSpec] = Field(default_factory=list)
    agents: list[AgentSpec] = Field(default_factory=list)
    broker: BrokerConfig = Field(default_factory=BrokerConfig)
    a2a: A2AConfig = Field(default_factory=A2AConfig, alias="a2a")
    gateway: GatewayConfig = Field(default_factory=lambda: GatewayConfig())
    sessions: SessionsConfig = Field(default_factory=lambda: SessionsConfig())
    project_instructions: bool = True
    """Whether sessions read the project's AGENTS.md (or CLAUDE.md, GEMINI.md)."""
    sandbox: SandboxLevel = "off"
    """The sandbox commands run in (`raven.sandbox`): `off`, `workspace`, `strict`; where
    the kernel cannot hold it, commands run without it and say so."""
    sandbox_allow_hosts: list[Annotated[str, Field(pattern=r"^([^\s:]+:)?[0-9]{1,5}$")]] = Field(
        default_factory=list
    )
    """`host:port` entries `strict` lets commands reach over TCP (by port: the kernel
    tells ports apart, not hosts)."""

    @model_validator(mode="after")
    def _check_references(self) -> RavenConfig:
        _unique([m.id for m in self.models], "models")
        _unique([m.id for m in self.modes], "modes")
        _unique([s.name for s in self.mcp_servers], "mcpServers")
        _unique([a.name for a in self.agents], "agents")
        names = {a.name for a in self.agents}
        for agent in self.agents:
            if unknown := sorted(set(agent.peers or ()) - names):
                raise ValueError(f"agent {agent.name!r} names peers not among agents: {unknown}")
        known_models = {m.id for m in self.models} | {ECHO_MODEL_ID}
        if self.default_model and self.default_model not in known_models:
            raise ValueError(f"defaultModel {self.default_model!r} is not among models")
        if self.compaction.model and self.compaction.model not in known_models:
            raise ValueError(f"compaction.model {self.compaction.model!r} is not among models")
        if self.default_mode and self.default_mode not in {m.id for m in self.modes}:
            raise ValueError(f"defaultMode {self.default_mode!r} is not among modes")
        return self

    def find_model(self, model_id: str) -> ModelSpec | None:
        if model_id == ECHO_MODEL_ID and all(m.id != ECHO_MODEL_ID for m in self.models):
            return _echo()
        return next((m for m in self.models if m.id == model_id), None)

    def prices(self) -> dict[str, tuple[float, float]]:
        """Model id → (input, output) dollars per million tokens, for the priced models."""
        return {m.id: (m.prices.input, m.prices.output) for m in self.models if m.prices}

    def selectable_models(self) -> list[ModelSpec]:
        """The configured models, then the offline echo model unless one is configured."""
        models = list(self.models)
        echo = self.find_model(ECHO_MODEL_ID)
        if echo is not None and echo not in models:
            models.append(echo)
        return models

    def find_mode(self, mode_id: str) -> ModeSpec | None:
        return next((m for m in self.modes if m.id == mode_id), None)

    def roster(self) -> list[dict[str, str]]:
        """The enabled sub-agents as reference data: name and description only."""
        return [{"name": a.name, "description": a.description} for a in self.agents if a.enabled]


@functools.cache
def _echo() -> ModelSpec:
    """The offline echo model, when no model of that id is configured (one, it is frozen)."""
    return ModelSpec(id=ECHO_MODEL_ID, name="Echo (offline)", provider="scripted")


def _unique(ids: list[str], key: str) -> None:
    what = "name" if key in ("mcpServers", "agents") else "id"
    seen: set[str] = set()
    for item in ids:
        if item in seen:
            raise ValueError(f"{key}: {what} {item!r} appears twice")
        seen.add(item)
