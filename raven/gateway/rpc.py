"""Raven RPC served to one WebSocket, and the broker that lets any UI answer a turn's questions.

Each socket is a JSON-RPC peer on Raven's own JSON-RPC layer (a text message is a
frame); every frame a UI is sent passes through redaction, as the editor's do.
Requests are parsed with the contract's models; Raven's errors become the
contract's codes here, once. Turns run in the gateway, not in a socket: a socket
that goes away never stops one.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import to_json

from raven.config import ECHO_MODEL_ID, ConfigError
from raven.engine import (
    BadDirectory,
    CursorExpired,
    LiveSession,
    Logged,
    Runtime,
    SessionBusy,
    SessionClosed,
    SessionNotFound,
    SessionRecord,
    TurnEvent,
    UnknownMode,
    UnknownModel,
    session_directory,
    start_turn,
)
from raven.engine.codec import event_json
from raven.engine.compaction import NothingToCompact
from raven.errors import RavenError, invalid_fields
from raven.gateway.questions import HubAsker, Questions
from raven.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    Connection,
    FrameReader,
    RpcError,
)
from raven.messages import TextPart
from raven.redact import redact_json
from raven.rpc import contract as c
from raven.sandbox import enforcement
from raven.usage import as_json, totals

log = logging.getLogger(__name__)

_HANDLERS = {name: "_" + name.replace(".", "_") for name in c.METHODS}
"""Each Raven RPC method's handler, by name, made once: Python 3.11's method cache keeps
each name it looked up, so names made anew for each UI stayed, scattered through the memory
the UI's state freed."""


class Hub:
    """What every socket shares: the runtime, every UI, pending questions."""

    def __init__(self, runtime: Runtime, a2a_mounted: Callable[[], bool]) -> None:
        self.runtime = runtime
        self.a2a_mounted = a2a_mounted
        self.peers: set[Peer] = set()
        self.questions = Questions(runtime, self.broadcast)
        self.turns: set[asyncio.Task[Any]] = set()
        home = os.path.expanduser("~")  # left as it is when there is no home to know
        self.home = home if home != "~" else None
        self._followed: dict[str, tuple[LiveSession, Callable[[], None], int]] = {}
        """session id → (the live session, what stops the hub following it, its UIs here)."""
        self._last: tuple[Logged, bytes] | None = None
        """The event being handed to its followers, as a frame made (and redacted) once for
        all of them: a log gives one event to every follower before it takes the next."""

    def broadcast(self, method: str, params: c.Wire) -> None:
        """To every UI (a question waiting shows in each UI's session list, whichever
        session it watches)."""
        body = params.model_dump(mode="json", by_alias=True)
        for peer in list(self.peers):
            peer.notify(method, body)

    def asker(self, session_id: str) -> HubAsker:
        """The asker of a turn whose askings the UIs here answer."""
        return HubAsker(self._attend, session_id)

    def local_asker(self, session_id: str) -> HubAsker | None:
        """An asker for a turn this gateway did not start (an A2A task), when UIs are here."""
        return self.asker(session_id) if self.peers else None

    def _attend(self, session_id: str) -> Callable[[], None]:
        """Follow the session (its askings are shown to every UI here) until the returned
        function is called."""
        live = self.runtime.live(session_id)
        if live is None:
            return lambda: None
        self._follow(live)
        return lambda: self.unfollowed(session_id)

    def watch(self, live: LiveSession, peer: Peer, after: str | None = None) -> None:
        """Send the session's events to `peer`: those after the cursor `after` first, then
        live ones (none twice, none missed). Raises `CursorExpired`."""
        peer.unwatch(live.id)

        def send(entry: Logged) -> None:
            peer.send_frame(self._frame(live.id, entry, peer))

        peer.following[live.id] = (live, live.follow(send, after))
        self._follow(live)

    def _follow(self, live: LiveSession) -> None:
        """While a UI or a turn here follows the session, its askings are announced here."""
        followed = self._followed.get(live.id)
        if followed is not None and followed[0] is live:
            self._followed[live.id] = (live, followed[1], followed[2] + 1)
            return
        if followed is not None:
            followed[1]()
        self.questions.known(live, live.log.logged)
        stop = live.follow(lambda entry: self.questions.heard(live, entry))
        self._followed[live.id] = (live, stop, 1)

    def unfollowed(self, session_id: str) -> None:
        followed = self._followed.get(session_id)
        if followed is None:
            return
        live, stop, uis = followed
        if uis > 1:
            self._followed[session_id] = (live, stop, uis - 1)
            return
        stop()
        del self._followed[session_id]
        self.questions.forget(session_id)
        self.runtime.let_go(session_id)  # unless a turn or another face still has it

    def watching(self, live: LiveSession, peer: Peer) -> bool:
        followed = peer.following.get(live.id)
        return followed is not None and followed[0] is live and not live.closed

    def _frame(self, session_id: str, entry: Logged, peer: Peer) -> bytes:
        if self._last is not None and self._last[0] is entry:
            return self._last[1]
        # `c.SessionEventNote` as JSON, built as such: this runs for every event.
        body = {"sessionId": session_id, "cursor": entry.cursor, "event": event_json(entry.event)}
        frame = peer.connection.encode_notification("session.event", body)
        self._last = (entry, frame)
        return frame

    def forget(self, peer: Peer) -> None:
        """The UI is gone (its socket closed, or it was hung up): nothing is sent to it."""
        self.peers.discard(peer)
        peer.unwatch_socket()
        for session_id in list(peer.following):
            peer.unwatch(session_id)

    def waiting(self, session_id: str) -> list[dict[str, Any]]:
        """The announcements of what the session's turn still waits for."""
        return self.questions.waiting(session_id)

    async def aclose(self) -> None:
        for task in list(self.turns):
            task.cancel()
        if self.turns:
            await asyncio.wait(self.turns, timeout=5)


MAX_BACKLOG_FRAMES = 5000
MAX_BACKLOG_BYTES = 4 * 1024 * 1024
STALL_S = 5.0
"""A UI whose socket takes nothing more (its send buffer is full) is dropped once
`MAX_BACKLOG_BYTES` wait for it, or `MAX_BACKLOG_FRAMES` with none taken for `STALL_S`,
rather than buffered without limit; and, whatever waits, once its socket has taken
nothing for `STALL_S` after the frames stop coming (a UI that stopped reading as a turn
ended). A UI that keeps reading is never dropped for a burst."""


class Peer:
    """One connected UI: a JSON-RPC connection over its WebSocket's text messages.

    `blocked` says whether the socket can take no more now (its transport's buffer is
    full), `waiting` how many bytes it holds that the UI has not taken; `drop` hangs it
    up (close code 1013).
    """

    def __init__(
        self,
        hub: Hub,
        send: Callable[[bytes], Any],
        drop: Callable[[], Any],
        blocked: Callable[[], bool],
        waiting: Callable[[], int],
    ) -> None:
        self._hub = hub
        self._send = send
        self._drop = drop
        self._blocked = blocked
        self._waiting = waiting
        """Bytes the socket holds, not yet taken by the UI."""
        self._sent = 0
        self._watched = (0, 0)
        """(bytes waiting, frames sent) when the watch was armed."""
        self.dropped = False
        self.following: dict[str, tuple[LiveSession, Callable[[], None]]] = {}
        """session id → the live session this UI follows, and what stops that."""
        self._progress = time.monotonic()
        self._watch: asyncio.TimerHandle | None = None
        """Armed while the socket is blocked: drops the UI if it takes nothing meanwhile."""
        self.reader = asyncio.StreamReader()
        self.connection = Connection(
            FrameReader(self.reader), self._write, self, outbound=redact_json, dumps=to_json
        )
        self._handlers: dict[str, Callable[[Any], Any]] = {
            name: getattr(self, handler) for name, handler in _HANDLERS.items()
        }

    async def _write(self, data: bytes) -> None:
        if self.dropped:
            return  # what was queued for a UI that was hung up is let go at once
        await self._send(data[:-1])  # the frame without its line end
        self._progress = time.monotonic()

    def feed(self, text: str) -> None:
        self.reader.feed_data(text.encode() + b"\n")

    def notify(self, method: str, params: dict[str, Any]) -> None:
        if self._takes_more():
            self.connection.notify(method, params)

    def send_frame(self, frame: bytes) -> None:
        """A notification already encoded (and redacted) by one of the UIs' connections:
        they all share the same outbound pass."""
        if self._takes_more():
            self.connection.send_encoded(frame)

    def _takes_more(self) -> bool:
        if self.dropped:
            return False
        self._sent += 1
        if self._watch is None:
            self._watch_from(self._waiting())
        if self._behind():
            log.warning(
                "a Raven RPC socket takes nothing more (%d frames, %d bytes waiting); dropped",
                self.connection.backlog,
                self.connection.backlog_bytes,
            )
            self.hang_up()
            return False
        return True

    def unwatch(self, session_id: str) -> None:
        followed = self.following.pop(session_id, None)
        if followed is not None:
            followed[1]()
            self._hub.unfollowed(session_id)

    def _watch_from(self, waiting: int) -> None:
        """While bytes wait in the socket, look again in `STALL_S`."""
        if waiting:
            self._watched = (waiting, self._sent)
            self._watch = asyncio.get_running_loop().call_later(STALL_S, self._stalled)

    def _stalled(self) -> None:
        """The watch's end: with nothing sent since, a socket that took none of what
        waited in it is dropped (the backlog rules judge it while frames keep coming)."""
        self._watch = None
        if self.dropped:
            return
        waiting, sent = self._waiting(), self._sent
        if waiting and sent == self._watched[1] and waiting >= self._watched[0]:
            log.warning(
                "a Raven RPC socket took nothing for %gs (%d bytes waiting); dropped",
                STALL_S,
                waiting,
            )
            self.hang_up()
        else:
            self._watch_from(waiting)

    def unwatch_socket(self) -> None:
        """Stop watching the socket: the hub forgot the UI (its socket closed, or it was hung
        up). An armed watch would keep the UI's whole state alive for `STALL_S` after."""
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None

    def hang_up(self) -> None:
        """Stop sending to this UI and close its socket (1013), once."""
        if not self.dropped:
            self.dropped = True
            self._hub.forget(self)
            self._drop()

    def _behind(self) -> bool:
        backlog = self.connection
        if backlog.backlog_bytes < MAX_BACKLOG_BYTES and backlog.backlog < MAX_BACKLOG_FRAMES:
            return False
        if not self._blocked():
            return False  # it reads; the burst drains
        stalled = time.monotonic() - self._progress > STALL_S
        return stalled or backlog.backlog_bytes >= MAX_BACKLOG_BYTES

    async def handle_request(self, method: str, params: dict[str, Any]) -> Any:
        if method not in self._handlers:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}", {"method": method})
        params_model, result_model, _ = c.METHODS[method]
        try:
            parsed = params_model.model_validate(params)
        except ValidationError as exc:
            problems = invalid_fields(exc, "params")
            raise RpcError(INVALID_PARAMS, f"Invalid params: {problems}") from None
        try:
            result = await self._handlers[method](parsed)
        except RavenError as exc:
            raise _rpc_error(exc) from exc
        return result_model.model_validate(result).model_dump(mode="json", by_alias=True)

    async def handle_notification(self, method: str, params: dict[str, Any]) -> None:
        log.debug("ignored notification %s", method)

    # -- methods (named after the contract: session.create → _session_create) ----------------

    async def _system_hello(self, p: c.Empty) -> c.Hello:
        return c.Hello(cwd=str(Path.cwd()), home=self._hub.home)

    async def _session_create(self, p: c.SessionCreate) -> c.SessionInfo:
        live = await self._hub.runtime.new_session(Path(p.cwd), p.model, p.mode)
        self._hub.watch(live, self)
        return self._info(live.record)

    async def _session_list(self, p: c.SessionList) -> c.SessionPageResult:
        page = await self._hub.runtime.list_sessions(p.cwd, p.cursor, p.limit, p.query)
        return c.SessionPageResult(
            sessions=[self._info(r) for r in page.sessions],
            next_cursor=page.next_cursor,
        )

    async def _session_get(self, p: c.SessionGet) -> c.SessionDetail:
        runtime = self._hub.runtime
        record = await runtime.get_session(p.session_id)
        if record.closed:
            closed = await runtime.history(p.session_id, p.history_limit)
            events: list[Any] = list(closed)
            cursor, read, sandbox = None, [], ""
            spent = totals(await runtime.transcript(p.session_id))
        else:
            live = await self._live(p.session_id)
            await live.catch_up()
            snapshot = await live.snapshot(p.history_limit)
            record, events, cursor = live.record, snapshot.events(), snapshot.cursor
            read = live.project.names(live.cwd)
            level = live.sandbox.level
            sandbox = "" if level == "off" else enforcement(level)
            spent = await live.spent()  # read once while the session is in memory
        usage = None
        if not spent.empty:
            usage = c.SessionUsage.model_validate(as_json(spent, runtime.config.prices()))
        return c.SessionDetail(
            session=self._info(record),
            history=[event_json(e) for e in events],
            cursor=cursor,
            pending=self._hub.waiting(record.id),
            usage=usage,
            project_instructions=read,
            sandbox=sandbox,
        )

    async def _session_delete(self, p: c.SessionRef) -> c.Accepted:
        await self._hub.runtime.delete_session(p.session_id)
        return c.Accepted()

    async def _session_close(self, p: c.SessionRef) -> c.Accepted:
        await self._hub.runtime.close_session(p.session_id)  # SessionNotFound for none
        return c.Accepted()

    async def _session_rename(self, p: c.SessionRename) -> c.SessionInfo:
        record = await self._hub.runtime.rename_session(p.session_id, p.title)
        return self._info(record)

    async def _session_compact(self, p: c.SessionRef) -> c.Compacted:
        live = await self._live(p.session_id)
        end = await self._hub.runtime.compact(live)
        return c.Compacted(
            status="completed" if end.status == "completed" else "failed",
            summary=end.summary,
            error=end.error,
            tokens_before=end.tokens_before,
            tokens_after=end.tokens_after,
        )

    async def _session_setMode(self, p: c.SessionSetMode) -> c.SessionInfo:
        live = await self._live(p.session_id)
        await self._hub.runtime.set_mode(live, p.mode)
        return self._info(live.record)

    async def _session_setModel(self, p: c.SessionSetModel) -> c.SessionInfo:
        live = await self._live(p.session_id)
        await self._hub.runtime.set_model(live, p.model)
        return self._info(live.record)

    async def _session_subscribe(self, p: c.SessionSubscribe) -> c.Accepted:
        live = await self._live(p.session_id)
        await live.reach(p.after)
        self._hub.watch(live, self, p.after)
        return c.Accepted()

    async def _session_unsubscribe(self, p: c.SessionRef) -> c.Accepted:
        self.unwatch(p.session_id)
        return c.Accepted()

    async def _turn_send(self, p: c.TurnSend) -> c.Accepted:
        live = await self._live(p.session_id)
        hub = self._hub
        if not hub.watching(live, self):
            hub.watch(live, self)
        task = start_turn(live, [TextPart(text=p.text)], hub.asker(live.id), _ignore)
        hub.turns.add(task)
        task.add_done_callback(hub.turns.discard)
        task.add_done_callback(lambda _: hub.runtime.let_go(live.id))
        return c.Accepted()

    async def _turn_cancel(self, p: c.SessionRef) -> c.Accepted:
        await self._live(p.session_id)  # SessionNotFound, SessionClosed
        return c.Accepted(accepted=await self._hub.runtime.cancel_turn(p.session_id))

    async def _turn_steer(self, p: c.TurnSteer) -> c.Steered:
        await self._live(p.session_id)
        return c.Steered(steered=await self._hub.runtime.steer(p.session_id, p.text))

    async def _permission_respond(self, p: c.PermissionRespond) -> c.Accepted:
        await self._hub.questions.settle(p.request_id, p.decision)
        return c.Accepted()

    async def _question_respond(self, p: c.QuestionRespond) -> c.Accepted:
        await self._hub.questions.settle(p.request_id, p.answer)
        return c.Accepted()

    async def _models_list(self, p: c.Empty) -> c.ModelsResult:
        specs = self._hub.runtime.config.selectable_models()
        try:
            default: str | None = self._hub.runtime.model(None).id
        except ConfigError:
            default = None
        models = [c.ModelInfo(id=m.id, name=m.display_name, provider=m.provider) for m in specs]
        return c.ModelsResult(models=models, default=default, offline=ECHO_MODEL_ID)

    async def _modes_list(self, p: c.Empty) -> c.ModesResult:
        config = self._hub.runtime.config
        modes = [
            c.ModeInfo(id=m.id, name=m.name, description=m.description, approvals=m.approvals)
            for m in config.modes
        ]
        default = self._hub.runtime.mode(None)
        return c.ModesResult(modes=modes, default=default.id if default else None)

    async def _agents_list(self, p: c.Empty) -> c.AgentsResult:
        agents = [
            c.AgentInfo(
                name=a.name,
                description=a.description,
                protocol=a.protocol,
                permissions=a.permissions,
            )
            for a in self._hub.runtime.config.agents
            if a.enabled
        ]
        return c.AgentsResult(agents=agents)

    async def _a2a_status(self, p: c.Empty) -> c.A2AStatus:
        server = self._hub.runtime.config.a2a.server
        mounted = self._hub.a2a_mounted()
        return c.A2AStatus(enabled=server.enabled, mounted=mounted, path=server.path)

    async def _directory_list(self, p: c.DirectoryList) -> c.DirectoryListing:
        return await asyncio.to_thread(_subdirectories, p.path)

    # -- helpers ---------------------------------------------------------------------------

    async def _live(self, session_id: str) -> LiveSession:
        return self._hub.runtime.live(session_id) or await self._hub.runtime.open_session(
            session_id
        )

    def _info(self, record: SessionRecord) -> c.SessionInfo:
        live = self._hub.runtime.live(record.id)
        return c.SessionInfo(
            session_id=record.id,
            cwd=record.cwd,
            title=record.title,
            mode=record.mode,
            model=record.model,
            face=record.face,
            created_at=record.created_at,
            updated_at=record.updated_at,
            closed=record.closed,
            busy=live is not None and live.running,
            waiting=len(self._hub.waiting(record.id)),
            failure=record.failure,
        )


def _subdirectories(path: str) -> c.DirectoryListing:
    """The listing of `path`: `BadDirectory` unless an existing absolute directory, an
    invalid-params error for one Raven may not read."""
    where = session_directory(path).resolve()
    try:
        with os.scandir(where) as entries:
            names = [e.name for e in entries if not e.name.startswith(".") and _is_dir(e)]
    except OSError as exc:
        raise RpcError(INVALID_PARAMS, f"cannot read {path}: {exc.strerror}") from None
    names.sort(key=lambda name: (name.casefold(), name))
    shown = names[: c.MAX_LISTED_DIRECTORIES]
    parent = str(where.parent) if where.parent != where else None
    return c.DirectoryListing(
        path=str(where), parent=parent, directories=shown, truncated=len(names) > len(shown)
    )


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()  # follows links: a link to a directory is one to choose
    except OSError:
        return False


def _ignore(event: TurnEvent) -> None:
    """A gateway turn's events reach its UIs through the session's log."""


def _rpc_error(exc: RavenError) -> RpcError:
    """Raven's errors as the contract's codes."""
    if isinstance(exc, SessionNotFound):
        return RpcError(c.Code.SESSION_NOT_FOUND, f"Session not found: {exc.session_id}")
    if isinstance(exc, UnknownModel | UnknownMode | BadDirectory):
        return RpcError(INVALID_PARAMS, str(exc))
    if isinstance(exc, SessionBusy | SessionClosed | NothingToCompact):
        return RpcError(INVALID_REQUEST, str(exc))
    if isinstance(exc, CursorExpired):
        return RpcError(c.Code.CURSOR_EXPIRED, str(exc))
    log.error("request failed: %s", exc)
    return RpcError(INTERNAL_ERROR, str(exc))
