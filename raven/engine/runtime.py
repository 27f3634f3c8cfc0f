"""The runtime a face holds: config, store and providers, and the live sessions made from them.

Creates, opens and switches sessions; never runs a turn itself.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

from raven import heap
from raven.config import ECHO_MODEL_ID, ConfigError, ModelSpec, ModeSpec, Paths, RavenConfig
from raven.engine.asker import Answer
from raven.engine.compaction import Compactor
from raven.engine.errors import (
    SessionBusy,
    SessionClosed,
    UnknownMode,
    UnknownModel,
    session_directory,
)
from raven.engine.events import (
    CompactionUpdated,
    ModeChanged,
    ModelChanged,
    SessionEnded,
    TitleChanged,
    TurnEnded,
)
from raven.engine.history import HistoryEvent, history_events
from raven.engine.log import LogEvent
from raven.engine.session import LiveSession
from raven.engine.turn import compact_session
from raven.messages import Message
from raven.providers import NoModelConfigured, Provider, create_provider, pick_model
from raven.sandbox import Sandbox, enforcement, kernel_version
from raven.sessions import (
    SearchHit,
    SessionPage,
    SessionRecord,
    SharedSessions,
    TurnElsewhere,
    new_record,
    open_sessions,
)
from raven.sessions.records import DEFAULT_PAGE_SIZE
from raven.sessions.tasks import TaskRows
from raven.tools import ToolSource, builtin_tools

SUBAGENT_FACE = "subagent"
"""The face a sub-agent Raven's sessions are made by: its parent's tasks, not a person's."""

if TYPE_CHECKING:
    from raven.engine.replicas import Replicas
    from raven.engine.shared_log import SharedLog
    from raven.engine.stand_in import StandIn

log = logging.getLogger(__name__)

GIVE_BACK_CHARS = 4_000_000
"""A session let go of whose window held this much (a long answer, say), or the last one
in memory, has the heap's free pages given back to the system (`raven.heap`)."""

T = TypeVar("T")
STOP_TURN_S = 5.0
"""How long closing or deleting a session waits for its cancelled turn to end."""


class ClosableToolSource(ToolSource, Protocol):
    async def aclose(self) -> None: ...


class Runtime:
    """`tool_sources` are shared by every session; the runtime closes them with itself."""

    def __init__(
        self,
        config: RavenConfig,
        paths: Paths,
        face: str,
        tool_sources: Sequence[ClosableToolSource] = (),
    ) -> None:
        self.config = config
        self.paths = paths
        self.face = face
        self.tool_sources = list(tool_sources)
        self.store = open_sessions(config.sessions, paths)
        self._providers: dict[str, Provider] = {}
        self._live: dict[str, LiveSession] = {}
        self._idle: dict[str, asyncio.TimerHandle] = {}
        """Sessions let go of (`let_go`), each with the timer that drops it."""
        self._releasing: set[asyncio.Future[None]] = set()
        """Releases of claims no turn took (`release`), kept until done."""
        self._shared: SharedLog | None = None
        self._replicas: Replicas | None = None
        if self.store.shared:  # loaded only then: `raven acp` on SQLite never needs them
            from raven.engine.replicas import Replicas
            from raven.engine.shared_log import SharedLog

            store = cast(SharedSessions, self.store)
            self._shared = SharedLog(store, self._adopt)
            self._replicas = Replicas(
                store,
                self._shared,
                lambda: list(self._live.values()),
                self._task_changed,
                self._swept,
            )
        self.jail = Sandbox.of(config, paths)
        """The sandbox of every session's commands, as the config has it."""
        if config.sandbox != "off" and kernel_version() < 1:
            log.warning("sandbox %s", enforcement(config.sandbox))
        self._task_listeners: list[Callable[[str | None, int], None]] = []
        self._sweepers: list[Callable[[list[str]], Awaitable[None]]] = []

    @property
    def shared(self) -> bool:
        """Replicas share the session store: a session's turn may run in another process."""
        return self._shared is not None

    @property
    def tasks(self) -> TaskRows:
        """The session store, for the tasks a face keeps beside the sessions."""
        return self.store

    def on_task_change(self, listener: Callable[[str | None, int], None]) -> None:
        """Call `listener` with a task's id and new version when a replica (this one too)
        writes it to the shared store (`raven.sessions.tasks`), or with (None, 0) when any
        may have changed unheard."""
        self._task_listeners.append(listener)

    def _task_changed(self, task_id: str | None, version: int) -> None:
        for listener in self._task_listeners:
            listener(task_id, version)

    def on_sweep(self, sweeper: Callable[[list[str]], Awaitable[None]]) -> None:
        """With a shared store: await `sweeper` every third of `leaseS`, once this
        process's claims are renewed and the lapsed turns ended (it is given the sessions
        whose turns this process just ended so): a face ends what of its own no turn runs
        any more (A2A: the tasks whose session's turn is gone)."""
        self._sweepers.append(sweeper)

    async def _swept(self, lapsed: list[str]) -> None:
        for sweeper in self._sweepers:
            await sweeper(lapsed)

    async def start(self) -> None:
        """With a shared store: begin hearing the other replicas, keeping this process's
        claims and ending lapsed ones. Done at the first session used otherwise; a server
        calls it on starting, so it does this work before anyone asks it anything."""
        if self._replicas is not None:
            await self._replicas.start()

    async def aclose(self) -> None:
        for timer in self._idle.values():
            timer.cancel()
        self._idle.clear()
        if self._replicas is not None:
            await self._replicas.aclose()
        if self._shared is not None:
            await self._shared.aclose()
        for session_id in list(self._live):
            await self._release(session_id)
        for source in self.tool_sources:
            await source.aclose()
        for provider in self._providers.values():
            await provider.aclose()
        self._providers.clear()
        self._live.clear()
        await self.store.aclose()

    def model(self, model_id: str | None) -> ModelSpec:
        """The named model, else the default; raises `UnknownModel` or `NoModelConfigured`."""
        if model_id and self.config.find_model(model_id) is None:
            raise UnknownModel(model_id, [m.id for m in self.config.models] + [ECHO_MODEL_ID])
        return pick_model(self.config, model_id, config_file=self.paths.config_file)

    def mode(self, mode_id: str | None) -> ModeSpec | None:
        """The named mode, else the default one, else the first; None when none are declared.

        Raises `UnknownMode`.
        """
        if mode_id:
            mode = self.config.find_mode(mode_id)
            if mode is None:
                raise UnknownMode(mode_id, [m.id for m in self.config.modes])
            return mode
        chosen = self.config.default_mode
        if chosen:
            return self.config.find_mode(chosen)
        return self.config.modes[0] if self.config.modes else None

    def instructions(self, model: ModelSpec, mode: ModeSpec | None) -> str | None:
        """The system prompt the mode, else the model, declares; None for the default."""
        declared = (mode.system_prompt if mode else None) or model.system_prompt
        if declared is None or isinstance(declared, str):
            return declared
        path = self.paths.config_dir / Path(declared.file).expanduser()
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"systemPrompt file {path}: cannot read: {exc}") from exc

    def provider(self, spec: ModelSpec) -> Provider:
        if spec.id not in self._providers:
            self._providers[spec.id] = create_provider(spec, self.config, self.paths.config_dir)
        return self._providers[spec.id]

    def compactor(self) -> Compactor:
        """How sessions compact: the config's settings, and the model that summarises
        (`compaction.model`, else each session's own)."""
        settings = self.config.compaction
        if settings.model is None:
            return Compactor(settings)
        spec = self.model(settings.model)
        # Made at the first compaction: a session starts without the summariser's client.
        return Compactor(settings, lambda: self.provider(spec))

    def live(self, session_id: str) -> LiveSession | None:
        return self._live.get(session_id)

    async def new_session(
        self,
        cwd: Path,
        model_id: str | None = None,
        mode_id: str | None = None,
        session_id: str | None = None,
        deferred: bool = False,
        answered_by: StandIn | None = None,
        turn_follows: bool = False,
    ) -> LiveSession:
        """A new session in `cwd` (`BadDirectory` unless absolute and existing); `deferred`
        stores it with its first message instead of now. Where replicas must find it at
        once (a shared store) it is stored now, and with `turn_follows` (its first turn
        starts at once) claimed for that turn in the same statement. `answered_by` answers
        its turns in Raven's place (no model needs to be configured for it)."""
        cwd = session_directory(cwd)
        model = self._model_for(model_id, answered_by)
        mode = self.mode(mode_id)
        provider = self.provider(model)
        args = (str(cwd), self.face, mode.id if mode else None, model.id, session_id)
        claim_until = None
        deferred = deferred and not self.shared  # replicas must find it at once
        if turn_follows and self.shared:
            shared = cast(SharedSessions, self.store)
            record = await shared.create(*args, claimed=True)
            # Its first turn takes this claim while it is surely still held (it is renewed
            # once a turn holds it, every third of the lease).
            claim_until = asyncio.get_running_loop().time() + shared.lease_s / 3
        elif deferred:
            record = new_record(*args)
        else:
            record = await self.store.create(*args)
        return await self._keep(
            LiveSession(
                record=record,
                deferred=deferred,
                claim_until=claim_until,
                store=self.store,
                window=[],
                model=model,
                provider=provider,
                mode=mode,
                instructions=self.instructions(model, mode),
                limits=self.config.limits,
                tools=builtin_tools(),
                tool_sources=list(self.tool_sources),
                jail=self.jail,
                stand_in=answered_by,
                compactor=self.compactor(),
            )
        )

    async def fork_session(
        self, session_id: str, cwd: Path, turns: int | None = None
    ) -> LiveSession:
        """A new session in `cwd` holding the transcript of `session_id`, or its first
        `turns` turns (each begins with a person's message), with its title, mode and
        model, and naming it as its parent; the parent goes on unchanged. A turn running
        in the parent is forked as far as it has been kept."""
        cwd = session_directory(cwd)
        live = self._live.get(session_id)
        if live is not None and live.deferred:  # nothing said yet: nothing to keep
            return await self.new_session(cwd, live.model.id, live.mode.id if live.mode else None)
        upto = None
        if turns is not None:
            said = [
                i for i, m in enumerate(await self.store.messages(session_id)) if m.role == "user"
            ]
            upto = said[turns] if turns < len(said) else None
        record = await self.store.fork(session_id, str(cwd), self.face, upto)
        return await self.open_session(record.id)

    async def list_sessions(
        self,
        cwd: str | None = None,
        cursor: str | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
        query: str | None = None,
    ) -> SessionPage:
        """A person's stored sessions, most recently updated first (not those a sub-agent
        Raven keeps for its parent's tasks: `SUBAGENT_FACE`); `cursor` continues a page;
        `query` keeps those whose title or directory contains it."""
        return await self.store.page(cwd, cursor, limit, query, not_face=SUBAGENT_FACE)

    async def latest_session(self, cwd: str) -> str | None:
        """The session in `cwd` a person had most recently (`--continue`)."""
        page = await self.list_sessions(cwd, limit=1)
        return page.sessions[0].id if page.sessions else None

    async def get_session(self, session_id: str) -> SessionRecord:
        """The stored session; raises `SessionNotFound`."""
        return await self.store.get(session_id)

    async def history(self, session_id: str, last: int | None = None) -> list[HistoryEvent]:
        """The session's transcript (its newest `last` messages) as the events a turn emits."""
        messages = await self.store.messages(session_id, last)
        return list(history_events(messages))

    async def transcript(self, session_id: str) -> list[Message]:
        """The session's stored messages, in order (for printing or exporting it)."""
        return await self.store.messages(session_id)

    async def search_sessions(
        self, text: str, cwd: str | None = None, limit: int = 20
    ) -> list[SearchHit]:
        """Sessions whose transcripts hold every word of `text`, best first; each hit's
        snippet marks the words found between `MATCH_START` and `MATCH_END`."""
        return await self.store.search(text, cwd, limit)

    async def rename_session(self, session_id: str, title: str) -> SessionRecord:
        """Give the session a new title; its subscribers hear of it."""
        live = self._live.get(session_id)
        if live is not None:
            await live.set_title(title)
            return live.record
        return await self.store.update(session_id, title=title)

    async def find_session(self, prefix: str) -> str:
        """The id of the one stored session `prefix` names (a whole id or a unique prefix).

        Raises `SessionNotFound` or `AmbiguousSession`.
        """
        return await self.store.resolve(prefix)

    async def open_session(
        self,
        session_id: str,
        create_in: Path | None = None,
        reopen: bool = False,
        answered_by: StandIn | None = None,
    ) -> LiveSession:
        """The live session for a stored one, loading its transcript if not yet in memory;
        there is one per id in this process.

        A closed session raises `SessionClosed`, unless `reopen` (what ACP's load and
        resume ask for) opens it again. With `create_in`, a missing session is created
        there under `session_id` instead of raising `SessionNotFound`. `answered_by`
        answers its turns in Raven's place, as with `new_session`.
        """
        if session_id in self._live:
            live = self._live[session_id]
            live.stand_in = answered_by or live.stand_in
            return live
        if create_in is not None:
            model, mode = self._model_for(None, answered_by), self.mode(None)
            record, window = await self.store.get_or_create(
                session_id,
                str(create_in),
                self.face,
                mode.id if mode else None,
                model.id,
            )
        else:
            record = await self.store.get(session_id)
            window = await self.store.window(session_id)
        model = self._stored_model(record.model, answered_by)
        mode = self.config.find_mode(record.mode) if record.mode else None
        mode = mode or self.mode(None)
        if record.closed and not reopen:
            raise SessionClosed(session_id)
        if record.closed:
            record = await self.store.update(session_id, closed=False)
        return await self._keep(
            LiveSession(
                record=record,
                store=self.store,
                window=window.messages,
                window_start=window.start,
                version=window.start + len(window.messages),
                model=model,
                provider=self.provider(model),
                mode=mode,
                instructions=self.instructions(model, mode),
                limits=self.config.limits,
                tools=builtin_tools(),
                tool_sources=list(self.tool_sources),
                jail=self.jail,
                stand_in=answered_by,
                compactor=self.compactor(),
            )
        )

    async def compact(self, session: LiveSession) -> CompactionUpdated:
        """Summarise the session's older messages now (`raven.engine.compaction`); see
        `compact_session`."""
        return await compact_session(session)

    async def set_model(self, session: LiveSession, model_id: str) -> None:
        """Use the model for the session's next turns, here and on every replica."""
        model = self.model(model_id)
        self._use_model(session, model)
        if not session.deferred:  # else stored with its first message, as it is then
            session.record = await self.store.update(session.id, model=model.id)
        session.publish(ModelChanged(model.id))

    async def set_mode(self, session: LiveSession, mode_id: str) -> None:
        """Use the mode for the session's next turns, here and on every replica."""
        mode = self.mode(mode_id)
        self._use_mode(session, mode)
        if not session.deferred:
            session.record = await self.store.update(session.id, mode=mode_id)
        session.publish(ModeChanged(mode_id))

    def _use_model(self, live: LiveSession, model: ModelSpec) -> None:
        """The session's model in this process: set here, or by another replica."""
        live.use_model(model, self.provider(model), self.instructions(model, live.mode))

    def _use_mode(self, live: LiveSession, mode: ModeSpec | None) -> None:
        """The session's mode in this process: set here, or by another replica."""
        live.use_mode(mode, self.instructions(live.model, mode))

    def set_system_prompt(self, session: LiveSession, text: str | None) -> None:
        """The system prompt of the session's next turns in this process, instead of the
        mode's, the model's or Raven's own (`{cwd}`, `{date}`, `{platform}` filled in);
        None goes back to theirs. Not stored: another process keeps its own."""
        session.system = text or None

    def let_go(self, session_id: str) -> None:
        """Drop the session from memory once nothing here has needed it for
        `limits.idleSessionS`: no turn ran in it and nothing followed its log (a face
        calls it when its last follower left, or its turn ended). Meanwhile, with nothing
        following it, its log keeps each ended turn's text as one event. It stays stored
        and open; the next use reads its window again, and a cursor into the old log expires."""
        if (timer := self._idle.pop(session_id, None)) is not None:
            timer.cancel()
        live = self._live.get(session_id)
        if live is not None and not live.log.followed and not live.is_busy:
            live.log.settle()
        wait_s = self.config.limits.idle_session_s
        loop = asyncio.get_running_loop()
        self._idle[session_id] = loop.call_later(wait_s, self._idle_over, session_id)

    def _idle_over(self, session_id: str) -> None:
        self._idle.pop(session_id, None)
        live = self._live.get(session_id)
        if live is None or live.log.followed or live.is_busy:
            return
        big = live.window_chars >= GIVE_BACK_CHARS
        del live  # the last reference here: what it held is freed before it is given back
        self.release(session_id)
        if big or not self._live:  # a long answer went, or the last session: idle now
            heap.give_back()

    def release(self, session_id: str) -> None:
        """Drop the session from memory (it stays stored and open); a no-op if it is busy."""
        live = self._live.get(session_id)
        if live is not None and not live.is_busy:
            del self._live[session_id]
            if self._shared is not None:
                self._shared.detach(session_id)
            if live.claim_until is not None:  # stored claimed for a turn that never came
                live.claim_until = None
                released = asyncio.ensure_future(self.store.release_turn(session_id))
                self._releasing.add(released)
                released.add_done_callback(self._released)

    def _released(self, release: asyncio.Future[None]) -> None:
        self._releasing.discard(release)
        if not release.cancelled() and (exc := release.exception()) is not None:
            log.warning("a claim no turn took could not be let go: %s", exc)

    async def cancel_turn(self, session_id: str) -> bool:
        """Stop the session's running turn, here or (shared) on the replica running it;
        False when none runs."""
        live = self._live.get(session_id)
        if live is not None and live.cancel_turn():
            return True
        if self._shared is not None:
            return await cast(SharedSessions, self.store).send(session_id, "cancel")
        return False

    async def answer(self, session_id: str, request_id: str, value: Answer) -> bool:
        """Answer the session's asking `request_id` (an approval's decision, or a question's
        text): the turn waiting for it, here or (shared) on the replica running it, takes
        it instead of whatever its own face would have answered. False when no turn here
        waits for it and no turn elsewhere could."""
        live = self._live.get(session_id)
        if live is not None and live.answer(request_id, value):
            return True
        if self._shared is not None:
            body = json.dumps({"requestId": request_id, "value": value})
            return await cast(SharedSessions, self.store).send(session_id, "answer", body)
        return False

    async def steer(self, session_id: str, text: str) -> bool:
        """Hand `text` to the session's running turn, here or (shared) on the replica
        running it; False when none runs."""
        live = self._live.get(session_id)
        if live is not None and live.steer(text):
            return True
        if self._shared is not None:
            return await cast(SharedSessions, self.store).send(session_id, "steer", text)
        return False

    async def close_session(self, session_id: str) -> None:
        """Stop the session's turn (within `STOP_TURN_S`, else `TurnStuck`), mark it closed
        and let tool sources free what they keep for it; its transcript stays. Refused with
        `SessionBusy` while another Raven process runs a turn in it."""
        live = await self._stopped(session_id)
        record = await self._elsewhere_refused(
            self.store.update(session_id, closed=True, guarded=True)
        )
        if live is None and self._shared is not None:  # replicas that have it live hear it
            await self._shared.publish_stored(session_id, SessionEnded())
        self._end(live, record)
        await self._release(session_id)

    async def delete_session(self, session_id: str) -> bool:
        """Stop the session's turn as `close_session` does, then remove it and its
        transcript; False when there was none."""
        live = await self._stopped(session_id)
        deleted = await self._elsewhere_refused(self.store.delete(session_id, guarded=True))
        if live is not None:
            self._end(live, live.record)
        await self._release(session_id)
        return bool(deleted)

    async def _stopped(self, session_id: str) -> LiveSession | None:
        live = self._live.get(session_id)
        if live is not None:
            await live.stop_turn(STOP_TURN_S)
        return live

    async def _elsewhere_refused(self, write: Awaitable[T]) -> T:
        try:
            return await write
        except TurnElsewhere as exc:
            raise SessionBusy(exc.session_id, exc.pid, exc.remote) from None

    def _end(self, live: LiveSession | None, record: SessionRecord) -> None:
        if live is not None:
            self._live.pop(live.id, None)
            live.end(record)

    async def _release(self, session_id: str) -> None:
        for source in self.tool_sources:
            try:
                await source.release(session_id)
            except Exception:
                log.exception("a tool source failed to release session %s", session_id)

    async def _keep(self, session: LiveSession) -> LiveSession:
        session.reads_project = self.config.project_instructions
        session.read_project()
        self._live[session.id] = session
        if self._shared is not None:
            await self.start()
            session.shared = self._shared
            await self._shared.attach(session)
        return session

    def _adopt(self, live: LiveSession, event: LogEvent) -> None:
        """A session event read back from the shared log, perhaps another replica's."""
        if isinstance(event, SessionEnded):
            if self._live.get(live.id) is live:
                del self._live[live.id]
            if self._shared is not None:
                self._shared.detach(live.id)
            live.ended()
        elif isinstance(event, TitleChanged):
            live.record = dataclasses.replace(live.record, title=event.title)
        elif isinstance(event, TurnEnded):  # the store kept its error as the failure
            live.record = dataclasses.replace(live.record, failure=event.error)
        elif isinstance(event, ModeChanged) and event.mode_id != live.record.mode:
            mode = self.config.find_mode(event.mode_id)
            if mode is not None:
                self._use_mode(live, mode)
        elif isinstance(event, ModelChanged) and event.model_id != live.record.model:
            model = self.config.find_model(event.model_id)
            if model is not None:
                self._use_model(live, model)

    def _stored_model(self, model_id: str | None, answered_by: StandIn | None) -> ModelSpec:
        if model_id:
            spec = self.config.find_model(model_id)
            if spec is not None:
                return spec
            log.warning("session model %r is no longer configured; using the default", model_id)
        return self._model_for(None, answered_by)

    def _model_for(self, model_id: str | None, answered_by: StandIn | None) -> ModelSpec:
        """`model(model_id)`; for a session another agent answers, the offline model when
        none is configured (it is never called: the agent answers)."""
        try:
            return self.model(model_id)
        except NoModelConfigured:
            if answered_by is None:
                raise
            return self.model(ECHO_MODEL_ID)
