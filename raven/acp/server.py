"""The ACP server face: a method table over the engine's runtime.

Parses each request into typed params, calls the runtime or `run_turn`, and
translates events into `session/update`. Never writes to stdout itself: every
frame goes through the `Connection`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from raven.acp import protocol as p
from raven.acp.asker import AcpAsker
from raven.acp.content import prompt_parts, stdio_specs, title_command
from raven.acp.handshake import SETUP_METHOD, initialize_result
from raven.acp.options import MODE_OPTION, MODEL_OPTION, config_options
from raven.acp.options import session_setup as setup
from raven.acp.subagents import ChildSessions
from raven.acp.translate import REPLAY_MAX_MESSAGES, event_update, replay_updates
from raven.config import ConfigError
from raven.engine import (
    BadCursor,
    BadDirectory,
    LiveSession,
    NoModelConfigured,
    Runtime,
    SessionBusy,
    SessionClosed,
    SessionNotFound,
    TitleChanged,
    TurnEvent,
    TurnStuck,
    UnknownMode,
    UnknownModel,
    run_turn,
    session_directory,
)
from raven.errors import RavenError
from raven.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    Connection,
    RpcError,
)
from raven.messages import TextPart
from raven.sandbox import LEVELS, SandboxUnavailable, capability

if TYPE_CHECKING:
    from raven.mcp import McpScope
    from raven.messages import Message

log = logging.getLogger(__name__)

LIST_PAGE_SIZE = 50
AVAILABLE_COMMANDS = [
    {"name": "title", "description": "Rename this session", "input": {"hint": "new title"}},
]

Handler = Callable[[dict[str, Any]], Awaitable[Any]]


@dataclass
class _Session:
    live: LiveSession
    mcp: McpScope | None = None
    """The MCP servers the editor attached to this session."""
    children: ChildSessions = field(init=False)
    """Its turns' sub-agents, for an editor that shows them as child sessions."""

    def __post_init__(self) -> None:
        self.children = ChildSessions(self.live.id)


class AcpServer:
    """Serves one editor connection. `runtime_factory` may raise `ConfigError`; without
    `owns_runtime`, the runtime is another's (the gateway's, shared by every connection):
    never closed nor built again here."""

    def __init__(self, runtime_factory: Callable[[], Runtime], owns_runtime: bool = True) -> None:
        self._runtime_factory = runtime_factory
        self._owns_runtime = owns_runtime
        self._runtime: Runtime | None = None
        self._connection: Connection | None = None
        self._initialized = False
        self._capabilities = p.ClientCapabilities()
        self._sessions: dict[str, _Session] = {}
        self._handlers: dict[str, Handler] = {
            p.INITIALIZE: self._initialize,
            p.AUTHENTICATE: self._authenticate,
            p.SESSION_NEW: self._new,
            p.SESSION_LOAD: self._load,
            p.SESSION_RESUME: self._resume,
            p.SESSION_FORK: self._fork,
            p.SESSION_LIST: self._list,
            p.SESSION_CLOSE: self._close,
            p.SESSION_DELETE: self._delete,
            p.SESSION_SET_MODE: self._set_mode,
            p.SESSION_SET_CONFIG_OPTION: self._set_config_option,
            p.SESSION_PROMPT: self._prompt,
            p.RAVEN_STEER: self._steer,
            p.SESSION_STEERING: self._steering,
        }

    def attach(self, connection: Connection) -> None:
        self._connection = connection

    async def handle_request(self, method: str, params: dict[str, Any]) -> Any:
        handler = self._handlers.get(method)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}", {"method": method})
        if not self._initialized and method != p.INITIALIZE:
            raise RpcError(INVALID_REQUEST, "Not initialized: send initialize first")
        try:
            return await handler(params)
        except RavenError as exc:
            raise _rpc_error(exc) from exc

    async def handle_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == p.SESSION_CANCEL and self._initialized:
            session_id = p.parse(p.SessionParams, params).session_id
            state = self._sessions.get(session_id)
            if state is not None:
                state.live.cancel_turn()
                return
            for state in self._sessions.values():  # a delegate call's child session, or its own
                if (target := state.children.cancellable(session_id)) is not None:
                    state.live.cancel_call(*target)
                    return
        else:
            log.debug("ignored notification %s", method)

    async def shutdown(self) -> None:
        """Cancel running turns."""
        for state in self._sessions.values():
            state.live.cancel_turn()

    async def aclose(self) -> None:
        """Release every session's MCP servers, then the runtime."""
        await asyncio.gather(*(self._release_mcp(s) for s in self._sessions.values()))
        if self._runtime is not None and self._owns_runtime:
            await self._runtime.aclose()

    # -- methods ---------------------------------------------------------------------------

    def accept_initialize(self, params: dict[str, Any]) -> None:
        """Take in the editor's `initialize` (its capabilities), answered or not yet."""
        parsed = p.parse(p.InitializeParams, params)
        self._capabilities = parsed.client_capabilities
        self._initialized = True

    async def _initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        self.accept_initialize(params)
        return initialize_result(params)

    async def _authenticate(self, params: dict[str, Any]) -> dict[str, Any]:
        """`setup` is done in a terminal (`raven setup`); here it is acknowledged, and the
        next `session/new` sees the model it configured (it reads the config again when
        it finds no model)."""
        if params.get("methodId") != SETUP_METHOD["id"]:
            raise RpcError(INVALID_PARAMS, f"Unknown auth method: {params.get('methodId')!r}")
        return {}

    async def _new(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = p.parse(p.NewSessionParams, params)
        cwd = session_directory(parsed.cwd)
        runtime = self._require_runtime()
        try:
            live = await runtime.new_session(cwd)
        except NoModelConfigured:
            if self._sessions or not self._owns_runtime:  # it serves sessions: it stays
                raise
            # `raven setup` (the setup auth method) may have written a model since this
            # runtime read the config: read it again, once.
            self._runtime = None
            await runtime.aclose()
            runtime = self._require_runtime()
            live = await runtime.new_session(cwd)
        return await self._started(live, parsed.mcp_servers)

    async def _load(self, params: dict[str, Any]) -> dict[str, Any]:
        state = await self._open(p.parse(p.OpenSessionParams, params))
        for update in replay_updates(state.live.snapshot(REPLAY_MAX_MESSAGES).events()):
            self._update(state.live.id, update)
        return setup(self._require_runtime().config, state.live)

    async def _resume(self, params: dict[str, Any]) -> dict[str, Any]:
        state = await self._open(p.parse(p.OpenSessionParams, params))
        return setup(self._require_runtime().config, state.live)

    async def _fork(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = p.parse(p.ForkSessionParams, params)
        runtime = self._require_runtime()
        meta = parsed.meta.get("raven")
        turns = meta.turns if meta is not None else None
        live = await runtime.fork_session(parsed.session_id, session_directory(parsed.cwd), turns)
        return await self._started(live, parsed.mcp_servers)

    async def _list(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = p.parse(p.ListSessionsParams, params)
        runtime = self._require_runtime()
        page = await runtime.list_sessions(parsed.cwd, parsed.cursor, LIST_PAGE_SIZE)
        sessions = []
        for record in page.sessions:
            info: dict[str, Any] = {
                "sessionId": record.id,
                "cwd": record.cwd,
                "updatedAt": record.updated_at,
            }
            if record.title:
                info["title"] = record.title
            if record.parent:
                info["_meta"] = {"raven": {"parentSessionId": record.parent}}
            sessions.append(info)
        result: dict[str, Any] = {"sessions": sessions}
        if page.next_cursor:
            result["nextCursor"] = page.next_cursor
        return result

    async def _close(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id = p.parse(p.SessionParams, params).session_id
        runtime = self._require_runtime()
        await runtime.close_session(session_id)
        state = self._sessions.get(session_id)
        if state is not None:
            await self._release_mcp(state)
        return {}

    async def _delete(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id = p.parse(p.SessionParams, params).session_id
        runtime = self._require_runtime()
        await runtime.delete_session(session_id)
        state = self._sessions.pop(session_id, None)
        if state is not None:
            await self._release_mcp(state)
        return {}

    async def _set_mode(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = p.parse(p.SetModeParams, params)
        state = self._state(parsed.session_id)
        await self._switch_mode(state.live, parsed.mode_id)
        self._update(
            state.live.id,
            {
                "sessionUpdate": "config_option_update",
                "configOptions": config_options(self._require_runtime().config, state.live),
            },
        )
        return {}

    async def _set_config_option(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = p.parse(p.SetConfigOptionParams, params)
        state = self._state(parsed.session_id)
        runtime = self._require_runtime()
        value = parsed.value
        if not isinstance(value, str):
            raise RpcError(INVALID_PARAMS, f"{parsed.config_id} takes a value id, not a boolean")
        if parsed.config_id == MODEL_OPTION:
            await runtime.set_model(state.live, value)
        elif parsed.config_id == MODE_OPTION:
            await self._switch_mode(state.live, value)
            self._update(
                state.live.id, {"sessionUpdate": "current_mode_update", "currentModeId": value}
            )
        elif parsed.config_id == p.SANDBOX_OPTION:
            if value not in LEVELS:
                raise RpcError(INVALID_PARAMS, f"acp.sandbox takes one of: {', '.join(LEVELS)}")
            state.live.require_sandbox(value)  # type: ignore[arg-type]
        else:
            raise RpcError(INVALID_PARAMS, f"Unknown config option {parsed.config_id!r}")
        return {"configOptions": config_options(runtime.config, state.live)}

    async def _prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = p.parse(p.PromptParams, params)
        state = self._state(parsed.session_id)
        parts = prompt_parts(parsed.prompt)
        live = state.live
        if (title := title_command(parts)) is not None:
            await live.set_title(title)
            self._emit(live, TitleChanged(title))
            return {"stopReason": "end_turn"}
        runtime = self._require_runtime()
        assert self._connection is not None
        asker = AcpAsker(
            self._connection, live.id, self._capabilities, runtime.config.limits.question_timeout_s
        )
        before = len(live.history)
        stop = await run_turn(live, parts, asker, lambda e: self._emit(live, e))
        return {"stopReason": stop, **_usage(live.history[before:])}

    async def _steer(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = p.parse(p.SteerParams, params)
        state = self._state(parsed.session_id)
        return {"status": "injected" if state.live.steer(parsed.text) else "no_turn"}

    async def _steering(self, params: dict[str, Any]) -> dict[str, Any]:
        """`_session/steering`: the prompt's text joins the running turn; with none running
        the client is told to send it as a prompt (`promptRequired`), so the turn's life
        stays with `session/prompt`."""
        parsed = p.parse(p.SteeringParams, params)
        state = self._state(parsed.session_id)
        text = "\n".join(t.text for t in prompt_parts(parsed.prompt) if isinstance(t, TextPart))
        if not text.strip():
            raise RpcError(INVALID_PARAMS, "Invalid params: the prompt holds no text to steer with")
        if state.live.steer(text):
            return {"outcome": "injected"}
        return {"outcome": "promptRequired", "reason": "noRunningTurn"}

    # -- helpers ---------------------------------------------------------------------------

    def _require_runtime(self) -> Runtime:
        if self._runtime is None:
            self._runtime = self._runtime_factory()
        return self._runtime

    def _state(self, session_id: str) -> _Session:
        state = self._sessions.get(session_id)
        if state is None:
            raise RpcError(
                p.RESOURCE_NOT_FOUND,
                f"Session {session_id} is not open here; load or resume it",
                {"sessionId": session_id},
            )
        return state

    async def _started(self, live: LiveSession, servers: list[dict[str, Any]]) -> dict[str, Any]:
        """A session new to this connection (made or forked): its MCP servers attached, its
        commands announced once it is answered, and the answer."""
        state = self._sessions[live.id] = _Session(live)
        await self._attach_mcp(state, servers)
        asyncio.get_running_loop().call_soon(self._announce_commands, live.id)
        return {"sessionId": live.id, **setup(self._require_runtime().config, live)}

    async def _open(self, parsed: p.OpenSessionParams) -> _Session:
        session_directory(parsed.cwd)  # the editor's view of it; the session keeps its own
        live = await self._require_runtime().open_session(parsed.session_id, reopen=True)
        state = self._sessions.get(live.id)
        if state is None or state.live is not live:
            state = self._sessions[live.id] = _Session(live)
        await self._attach_mcp(state, parsed.mcp_servers)
        return state

    async def _attach_mcp(self, state: _Session, servers: list[dict[str, Any]]) -> None:
        """Connect the session's own MCP servers (lazily, at its next turn), replacing any."""
        await self._release_mcp(state)
        specs = stdio_specs(servers)
        if not specs:
            return
        from raven.mcp import McpScope

        state.mcp = McpScope(specs, self._require_runtime().paths.logs_dir)
        state.live.attach_tools(state.mcp)

    async def _release_mcp(self, state: _Session) -> None:
        scope, state.mcp = state.mcp, None
        state.live.attach_tools(None)
        if scope is not None:
            await scope.aclose()

    async def _switch_mode(self, live: LiveSession, mode_id: str) -> None:
        await self._require_runtime().set_mode(live, mode_id)

    def _emit(self, live: LiveSession, event: TurnEvent) -> None:
        update = event_update(event, live.provider.context_window)
        if self._capabilities.subagents is None:
            if update is not None:
                self._update(live.id, update)
            return
        for session_id, sent in self._sessions[live.id].children.updates(event, update):
            self._update(session_id, sent)

    def _update(self, session_id: str, update: dict[str, Any]) -> None:
        assert self._connection is not None
        self._connection.notify(p.SESSION_UPDATE, {"sessionId": session_id, "update": update})

    def _announce_commands(self, session_id: str) -> None:
        self._update(
            session_id,
            {"sessionUpdate": "available_commands_update", "availableCommands": AVAILABLE_COMMANDS},
        )


def _rpc_error(exc: RavenError) -> RpcError:
    """Raven's errors as the JSON-RPC errors an editor sees."""
    if isinstance(exc, UnknownModel | UnknownMode | BadDirectory):
        return RpcError(INVALID_PARAMS, _sentence(str(exc)))
    if isinstance(exc, SessionBusy | SessionClosed):
        return RpcError(INVALID_REQUEST, _sentence(str(exc)))
    if isinstance(exc, TurnStuck):
        log.error("%s", exc)
        return RpcError(INTERNAL_ERROR, _sentence(str(exc)))
    if isinstance(exc, SessionNotFound):
        return RpcError(
            p.RESOURCE_NOT_FOUND,
            f"Session not found: {exc.session_id}",
            {"sessionId": exc.session_id},
        )
    if isinstance(exc, BadCursor):
        return RpcError(INVALID_PARAMS, str(exc))
    if isinstance(exc, SandboxUnavailable):  # as the ACP sandbox RFD (a draft) names it
        data = {"error": p.SANDBOX_UNSATISFIABLE, "capability": capability()}
        return RpcError(INVALID_PARAMS, f"{p.SANDBOX_UNSATISFIABLE}: {exc}", data)
    if isinstance(exc, NoModelConfigured):
        log.error("%s", exc)
        return RpcError(p.AUTH_REQUIRED, _sentence(str(exc)), {"authMethods": [SETUP_METHOD["id"]]})
    if isinstance(exc, ConfigError):
        log.error("configuration error: %s", exc)
        return RpcError(INTERNAL_ERROR, f"Raven's configuration is invalid: {exc}")
    log.error("request failed: %s", exc)
    return RpcError(INTERNAL_ERROR, str(exc))


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


def _usage(messages: Sequence[Message]) -> dict[str, Any]:
    """The turn's tokens, its sub-agents' included, as a prompt response's `usage`; nothing
    when no call reported any."""
    from raven.usage import totals

    spent = totals(messages)
    if spent.empty:
        return {}
    whole = spent.all()
    total = whole.input_tokens + whole.output_tokens
    usage = {"inputTokens": whole.input_tokens, "outputTokens": whole.output_tokens}
    return {"usage": {**usage, "totalTokens": total}}
