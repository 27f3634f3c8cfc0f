"""The ACP server face: a method table over the engine's runtime.

Parses each request into typed params, calls the runtime or `start_turn`, and
translates the events of each session it follows (its log, from a cursor) into
`session/update`, whichever connection runs the turn; what a turn asks is asked of every
editor following the session, the first answer winning. Never writes to stdout itself: every
frame goes through the `Connection`.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, get_args

from raven.acp import protocol as p
from raven.acp.asker import AcpAsker
from raven.acp.content import prompt_parts, stdio_specs, title_command
from raven.acp.handshake import SETUP_METHOD, initialize_result
from raven.acp.options import MODE_OPTION, MODEL_OPTION, config_options
from raven.acp.options import session_setup as setup
from raven.acp.subagents import ChildSessions
from raven.acp.translate import REPLAY_MAX_MESSAGES, event_update, replay_updates
from raven.broker.entry import broker_entry
from raven.config import ConfigError
from raven.engine import (
    Answer,
    Answered,
    AnsweredElsewhere,
    Asking,
    BadCursor,
    BadDirectory,
    CursorExpired,
    LiveSession,
    Logged,
    NoModelConfigured,
    Question,
    Runtime,
    SessionBusy,
    SessionClosed,
    SessionNotFound,
    TurnEvent,
    TurnStuck,
    UnknownMode,
    UnknownModel,
    session_directory,
    start_turn,
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
    from raven.tools import ToolSource

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
    unfollow: Callable[[], None] | None = None
    """Stops following the session's log (while this connection follows it)."""
    asking: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    """What the session's turn asks that this editor is being asked, by request id."""
    settled: set[str] = field(default_factory=set)
    """Askings answered already, as this connection heard (a replay skips them)."""

    def __post_init__(self) -> None:
        self.children = ChildSessions(self.live.id)


_FOLLOWED: Counter[str] = Counter()
"""The ACP connections of this process following each session: a turn left with none is
cancelled once `limits.detachedTurnS` passed (`_watch`)."""
_TURN_EVENTS = get_args(TurnEvent)


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
        """The editor is gone: stop following its sessions. A turn running in one of them
        is cancelled at once when this process serves this editor alone (`raven acp` over
        stdio), else once `limits.detachedTurnS` passed with no editor following it (a
        remote editor may reconnect and resume it by cursor)."""
        for state in self._sessions.values():
            self._unfollow(state)
            if self._owns_runtime:
                state.live.cancel_turn()
            elif state.live.running:
                bound = self._require_runtime().config.limits.detached_turn_s
                _watch(state.live, bound)

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
        parsed = p.parse(p.OpenSessionParams, params)
        state = await self._open(parsed)
        if parsed.after is not None:  # an editor that had it: what it missed, then live
            self._follow(state, parsed.after)
        else:
            snapshot = await state.live.snapshot(REPLAY_MAX_MESSAGES, windowed=True)
            for update in replay_updates(snapshot.events(), self._compaction):
                self._update(state.live.id, update)
            self._follow(state, snapshot.cursor)
        return setup(self._require_runtime().config, state.live)

    async def _resume(self, params: dict[str, Any]) -> dict[str, Any]:
        parsed = p.parse(p.OpenSessionParams, params)
        state = await self._open(parsed)
        self._follow(state, parsed.after)
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
            self._unfollow(state)
            await self._release_mcp(state)
        return {}

    async def _delete(self, params: dict[str, Any]) -> dict[str, Any]:
        session_id = p.parse(p.SessionParams, params).session_id
        runtime = self._require_runtime()
        await runtime.delete_session(session_id)
        state = self._sessions.pop(session_id, None)
        if state is not None:
            self._unfollow(state)
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
            await live.set_title(title)  # the editors following it hear it from the log
            return {"stopReason": "end_turn"}
        before = live.version
        # The turn's events reach this editor, and every other one following the session,
        # from its log; what it asks is asked of each of them, the first answer winning.
        # It goes on if this connection drops (`shutdown`).
        turn = start_turn(live, parts, AnsweredElsewhere(), _told_elsewhere)
        stop = await asyncio.shield(turn)
        return {"stopReason": stop, **_usage(live.since(before))}

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
        self._follow(state)
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
        """Connect the session's own MCP servers (lazily, at its next turn), replacing any.
        The broker's, which a parent Raven gives its children, is Raven's own `a2a` tool."""
        await self._release_mcp(state)
        sources: list[ToolSource] = []
        if brokers := [b for e in servers if (b := broker_entry(e)) is not None]:
            from raven.broker.tool import broker_tools

            sources.append(broker_tools(*brokers[0]))
            servers = [e for e in servers if broker_entry(e) is None]
        if specs := stdio_specs(servers):
            from raven.mcp import McpScope

            state.mcp = McpScope(specs, self._require_runtime().paths.logs_dir)
            sources.append(state.mcp)
        state.live.attach_tools(*sources)

    async def _release_mcp(self, state: _Session) -> None:
        scope, state.mcp = state.mcp, None
        state.live.attach_tools()
        if scope is not None:
            await scope.aclose()

    async def _switch_mode(self, live: LiveSession, mode_id: str) -> None:
        await self._require_runtime().set_mode(live, mode_id)

    def _follow(self, state: _Session, after: str | None = None) -> None:
        """Follow the session's log from `after` (None: from now): its turns' updates reach
        this editor, whichever connection or face runs them, and what a turn asks is asked
        here too. Raises `CursorExpired` when the log no longer holds what follows
        `after`."""
        self._unfollow(state)
        live = state.live
        logged = live.log.logged
        state.settled |= {e.event.request_id for e in logged if isinstance(e.event, Answered)}
        state.unfollow = live.follow(lambda entry: self._heard(state, entry), after)
        _FOLLOWED[live.id] += 1
        for entry in logged:  # what its turn waits for is asked here too
            if isinstance(entry.event, Asking):
                self._ask(state, entry.event)

    def _unfollow(self, state: _Session) -> None:
        if state.unfollow is None:
            return
        state.unfollow()
        state.unfollow = None
        _FOLLOWED[state.live.id] -= 1
        if _FOLLOWED[state.live.id] <= 0:
            del _FOLLOWED[state.live.id]
        for task in state.asking.values():
            task.cancel()

    def _heard(self, state: _Session, entry: Logged) -> None:
        """One event of a session this connection follows."""
        event = entry.event
        if isinstance(event, Asking):
            self._ask(state, event)
        elif isinstance(event, Answered):
            state.settled.add(event.request_id)
            if (asked := state.asking.pop(event.request_id, None)) is not None:
                asked.cancel()  # answered elsewhere: the editor's request is withdrawn
        elif isinstance(event, _TURN_EVENTS):
            self._emit(state.live, event, entry.cursor)

    def _ask(self, state: _Session, asking: Asking) -> None:
        rid = asking.request_id
        if rid in state.settled or rid in state.asking:
            return
        task = asyncio.create_task(self._ask_editor(state.live, asking))
        state.asking[rid] = task
        task.add_done_callback(lambda _: state.asking.pop(rid, None))

    async def _ask_editor(self, live: LiveSession, asking: Asking) -> None:
        """Ask this editor what the turn asks, and answer the turn through the engine
        (the first answer from anywhere wins); nothing when the editor went away."""
        runtime, connection = self._require_runtime(), self._connection
        assert connection is not None
        timeout_s = runtime.config.limits.question_timeout_s
        asker = AcpAsker(connection, live.id, self._capabilities, timeout_s)
        value: Answer
        if asking.approval is not None:
            value = await asker.approve(asking.approval)
        else:
            value = await asker.ask(asking.question or Question(text=""))
        if not connection.closed:
            await runtime.answer(live.id, asking.request_id, value)

    def _emit(self, live: LiveSession, event: TurnEvent, cursor: str | None = None) -> None:
        update = event_update(event, live.provider.context_window, self._compaction)
        if self._capabilities.subagents is None:
            if update is not None:
                self._update(live.id, update, cursor)
            return
        for session_id, sent in self._sessions[live.id].children.updates(event, update):
            self._update(session_id, sent, cursor)

    @property
    def _compaction(self) -> bool:
        """The editor shows compactions (`session.compaction`, ACP schema 1.25)."""
        session = self._capabilities.session
        return session is not None and session.compaction is not None

    def _update(self, session_id: str, update: dict[str, Any], cursor: str | None = None) -> None:
        """One `session/update`; with the log's `cursor` after it, which `session/load` or
        `session/resume` take (`_meta.raven.after`) to go on right there."""
        assert self._connection is not None
        params: dict[str, Any] = {"sessionId": session_id, "update": update}
        if cursor is not None:
            params["_meta"] = {"raven": {"cursor": cursor}}
        self._connection.notify(p.SESSION_UPDATE, params)

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
    if isinstance(exc, CursorExpired):  # `_meta.raven.after` too old: load it whole
        return RpcError(INVALID_PARAMS, f"{_sentence(str(exc))} Load the session instead.")
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


def _told_elsewhere(event: TurnEvent) -> None:
    """What the engine tells the face running the turn: the log tells every editor."""


def _watch(live: LiveSession, bound_s: float) -> None:
    """Cancel the session's running turn once `bound_s` passed with no ACP editor of this
    process following the session."""

    async def watch() -> None:
        await asyncio.sleep(bound_s)
        if not _FOLLOWED.get(live.id) and live.cancel_turn():
            log.info("cancelled the turn of session %s: no editor followed it", live.id)

    task = asyncio.get_running_loop().create_task(watch())
    _WATCHES.add(task)
    task.add_done_callback(_WATCHES.discard)


_WATCHES: set[asyncio.Task[None]] = set()
