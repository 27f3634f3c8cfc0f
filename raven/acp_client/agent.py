"""Driving one ACP sub-agent unattended: initialize, its session and forks of it, prompts,
permissions.

Speaks ACP through Raven's own JSON-RPC layer and the wire shapes of `raven.acp.protocol`.
Never invents an option id; answers `fs/*`, `terminal/*` and anything unknown with
method-not-found; every wait has its deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raven import __version__
from raven.acp import protocol as p
from raven.acp.handshake import PROTOCOL_VERSION
from raven.acp_client.modes import NoAskingMode, asking_mode, grants
from raven.acp_client.policy import REJECT, Judged, decide, judge, pick
from raven.acp_client.task import Turn, Voice
from raven.child_process import ChildProcess, why_not_started
from raven.config import AgentSpec
from raven.errors import RavenError
from raven.jsonrpc import METHOD_NOT_FOUND, Connection, ConnectionClosed, FrameReader, RpcError
from raven.messages import TokenUsage
from raven.redact import redact
from raven.sandbox import Sandbox, SandboxUnavailable
from raven.tools import (
    ALL_DECISIONS,
    Decision,
    FileDiff,
    Permission,
    Preview,
    Progress,
    Question,
    clip,
)

log = logging.getLogger(__name__)

CANCEL_GRACE_S = 5.0
STOP_FLUSH_S = 1.0
MAX_ERROR_DETAIL_CHARS = 1_000
REQUEST_TIMEOUT_S = 30.0
MAX_MODE_RESETS = 3
"""How often one session of a child may leave the mode that asks before Raven stops it."""
LATE_WORK_S = 60.0
"""How long a task stays open after the child's answer while its own sub-agents still run or
its requests are still being answered (codex ends its turn before the sub-agents it spawned
have asked for what they need)."""
CONSENT_DECISIONS: tuple[Decision, ...] = ("allow_once", "reject_once")
"""What a person may answer to a consent: never "always", so none stands for the next."""


class SubAgentError(RavenError):
    """The sub-agent could not be started, answered badly, died, or timed out."""


@dataclass(frozen=True)
class AgentInfo:
    name: str
    version: str
    capabilities: dict[str, Any]
    title: str = ""
    """Its name for people, when it gave one."""


@dataclass
class Outcome:
    answer: str
    stop_reason: str
    decisions: list[str] = field(default_factory=list)
    """Each permission decision taken, as a line for people ("allowed once: Write a.txt")."""
    changes: str = ""
    """Where the task's changes are, under worktree isolation (for the parent model)."""
    usage: TokenUsage | None = None
    """What the task used, as the sub-agent reported it (None: it said nothing)."""


class SubAgent:
    """One sub-agent process with its ACP session, reused across prompts, and the forks of
    that session that run tasks beside it (when the child serves `session/fork`)."""

    def __init__(
        self,
        spec: AgentSpec,
        cwd: Path,
        sandbox: Sandbox | None = None,
        mcp_servers: list[dict[str, Any]] | None = None,
    ) -> None:
        self.spec = spec
        self.cwd = cwd
        self.sandbox = sandbox
        """What its process is started in (`spec.sandbox` over the session's), if any."""
        self.mcp_servers = mcp_servers or []
        """The MCP servers Raven gives each of its sessions (the broker's, say)."""
        self.info: AgentInfo | None = None
        self._child: ChildProcess | None = None
        self._connection: Connection | None = None
        self._serving: asyncio.Task[None] | None = None
        self._session_id = ""
        """The session Raven opened; its forks are in `_sessions` too."""
        self._sessions: set[str] = set()
        """The sessions Raven opened or forked, and has not closed: the child's messages
        about any other are ignored (its own sub-agents' are a turn's `others`)."""
        self._turns: dict[str, Turn] = {}
        """The task running in each session."""
        self.mode: str | None = None
        """The session mode Raven keeps the child in (`raven.acp_client.modes`)."""
        self._reasserting: set[asyncio.Task[None]] = set()
        self._sandboxes: dict[str, str | None] = {}
        """The sessions that offer the ACP sandbox RFD's `acp.sandbox` option, and the
        level Raven required of each (None: none yet)."""
        self._mode_resets = 0
        self._stopped_because: str | None = None

    async def start(self, resume: str | None = None) -> AgentInfo:
        """Spawn, initialize and open a session in the mode that asks, within `readyTimeoutS`:
        the child's session `resume` again when it can (`session/resume`, else
        `session/load`), a new one otherwise (`session_id` says which it is)."""
        try:
            self._child = await ChildProcess.spawn(
                self.spec.name,
                self.spec.command,
                self.spec.args,
                self.spec.env,
                self.cwd,
                sandbox=self.sandbox,
            )
        except OSError as exc:
            why = why_not_started(self.spec.name, self.spec.command, self.cwd, exc)
            raise SubAgentError(why) from None
        except SandboxUnavailable as exc:
            raise SubAgentError(f"sub-agent {self.spec.name} was not started: {exc}") from None
        proc = self._child.proc
        assert proc.stdin is not None and proc.stdout is not None
        stdin = proc.stdin

        async def write(data: bytes) -> None:
            stdin.write(data)
            await stdin.drain()

        self._connection = Connection(FrameReader(proc.stdout), write, self)
        self._serving = asyncio.create_task(self._connection.serve())
        try:
            async with asyncio.timeout(self.spec.ready_timeout_s):
                self.info = await self._initialize()
                result = await self._open(resume)
                await self._enter_mode(result, self._session_id)
        except TimeoutError:
            await self.stop()
            raise SubAgentError(
                f"sub-agent {self.spec.name} did not get ready within "
                f"{self.spec.ready_timeout_s:g}s{self._tail()}"
            ) from None
        except BaseException:
            await self.stop()
            raise
        return self.info

    async def _open(self, resume: str | None) -> Any:
        """Open Raven's session in the child: `resume` again when it can, else a new one."""
        params: dict[str, Any] = {"cwd": str(self.cwd), "mcpServers": self.mcp_servers}
        again = None
        if resume is not None and self._serves("resume"):
            again = p.SESSION_RESUME
        elif resume is not None and self.info and self.info.capabilities.get("loadSession"):
            again = p.SESSION_LOAD
        if again is not None:
            try:
                result = await self._request(again, {**params, "sessionId": resume})
            except SubAgentError as exc:  # gone from its store: a new one, as it says
                log.info("sub-agent %s: could not resume its session: %s", self.spec.name, exc)
            else:
                self._session_id = str(resume)
                self._sessions.add(self._session_id)
                return result
        result = await self._request(p.SESSION_NEW, params)
        created = p.read(p.NewSessionResult, result)
        if created is None:
            raise SubAgentError(
                f"sub-agent {self.spec.name} answered session/new without a "
                f"session id: {clip(json.dumps(result, default=str), 200)}"
            )
        self._session_id = created.session_id
        self._sessions.add(created.session_id)
        return result

    @property
    def session_id(self) -> str:
        """The child's session Raven opened (its forks aside)."""
        return self._session_id

    @property
    def forks(self) -> bool:
        """Whether the child serves `session/fork`."""
        return self._serves("fork")

    def _serves(self, method: str) -> bool:
        """Whether the child's `sessionCapabilities` offer `session/<method>`."""
        sessions = self.info.capabilities.get("sessionCapabilities") if self.info else None
        return isinstance(sessions, dict) and isinstance(sessions.get(method), dict)

    async def fork(self) -> str:
        """A fork of Raven's session (what the child knows so far, no cold start), put in the
        mode that asks as a new session is; its id, for `prompt` and then `close`."""
        result = await self._request(
            p.SESSION_FORK,
            {"sessionId": self._session_id, "cwd": str(self.cwd), "mcpServers": self.mcp_servers},
        )
        forked = p.read(p.NewSessionResult, result)
        if forked is None:
            raise SubAgentError(
                f"sub-agent {self.spec.name} answered session/fork without a session id: "
                f"{clip(json.dumps(result, default=str), 200)}"
            )
        self._sessions.add(forked.session_id)
        try:
            await self._enter_mode(result, forked.session_id)
        except BaseException:
            await self.close(forked.session_id)
            raise
        log.info("sub-agent %s: forked its session for a task beside it", self.spec.name)
        return forked.session_id

    async def close(self, session_id: str) -> None:
        """Let go of a fork: `session/close` when the child serves it; Raven ignores the
        session from now on either way."""
        self._sessions.discard(session_id)
        if not self._serves("close"):
            return
        with contextlib.suppress(SubAgentError):
            await self._request(p.SESSION_CLOSE, {"sessionId": session_id})

    async def prompt(
        self,
        task: str,
        progress: Callable[[Progress], None],
        approve: Callable[[Permission], Awaitable[Decision | None]] | None = None,
        ask: Callable[[Question], Awaitable[str | None]] | None = None,
        session_id: str | None = None,
        speak: Callable[[str], None] | None = None,
    ) -> Outcome:
        """Run one task to its end, in Raven's session or in a fork of it (`session_id`); a
        timeout or the caller's cancellation cancels it. The child's own text goes to
        `speak` as it comes, when given, instead of to `progress`."""
        sid = session_id or self._session_id
        turn = self._turns[sid] = Turn(progress, approve, ask, Voice(self.spec.name), speak)
        params = {"sessionId": sid, "prompt": [{"type": "text", "text": task}]}
        assert self._connection is not None
        request = asyncio.ensure_future(
            self._connection.request(p.SESSION_PROMPT, params, self.spec.prompt_timeout_s + 60)
        )
        try:
            async with asyncio.timeout(self.spec.prompt_timeout_s):
                result = await asyncio.shield(request)
            await self._late_work(turn)  # bounded on its own: the task itself has ended
        except TimeoutError:
            await self._cancel(request, sid)
            raise SubAgentError(
                f"sub-agent {self.spec.name} did not finish within "
                f"{self.spec.prompt_timeout_s:g}s; the task was cancelled"
            ) from None
        except asyncio.CancelledError:
            await self._cancel(request, sid)
            raise
        except ConnectionClosed:
            raise SubAgentError(await self._died()) from None
        except RpcError as exc:
            raise SubAgentError(
                f"sub-agent {self.spec.name} refused the task: {_said(exc)}"
            ) from None
        finally:
            del self._turns[sid]
        for voice in (turn.own, *turn.others.values()):
            voice.unsent += voice.safe.flush()
            if voice.untold:
                turn.tell_text(voice)
        ended = p.read(p.PromptResult, result) or p.PromptResult()
        usage = None
        if ended.usage is not None:
            spent = ended.usage
            usage = TokenUsage(
                by=self.spec.name,
                input_tokens=spent.input_tokens,
                output_tokens=spent.output_tokens,
            )
        return Outcome(turn.answer.text(), ended.stop_reason, turn.decisions, usage=usage)

    async def _late_work(self, turn: Turn) -> None:
        """Keep the task open, within `LATE_WORK_S`, until the sub-agents the child started
        are idle and what it asked is answered: their work is the task's, and answering
        it needs the turn (its rules' record and the person to escalate to)."""
        serving = self._serving
        if serving is None:
            return
        loop = asyncio.get_running_loop()
        until = loop.time() + LATE_WORK_S
        # Until settled and still so when this task looks (a sub-agent may start again in
        # the frames that came with the one that settled it), or the child is gone.
        while not turn.settled.is_set() and not serving.done() and loop.time() < until:
            settled = asyncio.ensure_future(turn.settled.wait())
            try:
                await asyncio.wait(
                    (settled, serving),
                    timeout=until - loop.time(),
                    return_when=asyncio.FIRST_COMPLETED,
                )
            finally:
                settled.cancel()
        if not turn.settled.is_set() and not serving.done():
            names = ", ".join(sorted(turn.others[sid].name for sid in turn.running))
            note = f"stopped waiting after {LATE_WORK_S:g}s for {names or 'its requests'}"
            turn.decisions.append(note)
            log.warning("sub-agent %s: %s", self.spec.name, note)

    async def stop(self) -> None:
        """Stop the child for good and end the connection's tasks."""
        for task in self._reasserting:
            task.cancel()
        if self._child is not None:
            await self._child.stop()
        if self._serving is not None:
            with contextlib.suppress(asyncio.TimeoutError, Exception):
                await asyncio.wait_for(self._serving, CANCEL_GRACE_S)
        if self._connection is not None:
            await self._connection.finish(STOP_FLUSH_S)

    @property
    def is_alive(self) -> bool:
        return self._child is not None and self._child.proc.returncode is None

    # -- what the sub-agent asks of Raven ----------------------------------------------------

    async def handle_request(self, method: str, params: dict[str, Any]) -> Any:
        if method not in (p.REQUEST_PERMISSION, p.ELICITATION_CREATE):
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}", {"method": method})
        turn, voice = self._speaker(method, params)
        if turn is not None:
            turn.asking += 1
            turn.settle()
        try:
            if method == p.REQUEST_PERMISSION:
                asked = p.read(p.PermissionRequest, params)
                if voice is None or asked is None:
                    return {"outcome": {"outcome": "cancelled"}}
                return await self._permission(turn, voice, asked)
            elicited = p.read(p.ElicitationRequest, params)
            if voice is None or elicited is None:
                return {"action": "decline"}
            return await self._elicit(turn, voice, elicited)
        finally:
            if turn is not None:
                turn.asking -= 1
                turn.settle()

    async def handle_notification(self, method: str, params: dict[str, Any]) -> None:
        name = self.spec.name
        if method == p.ELICITATION_COMPLETE:
            log.info("sub-agent %s: consent %s completed", name, params.get("elicitationId"))
            return
        if method != p.SESSION_UPDATE:
            log.debug("sub-agent %s: ignored a %s notification (not one Raven knows)", name, method)
            return
        sid, said = params.get("sessionId"), params.get("update")
        changed = p.read(p.ModeChange, said)
        if changed is not None and sid in self._sessions:
            self._mode_changed(sid, changed)
            return
        turn, voice = self._speaker(method, params)
        if turn is None or voice is None:
            return
        if voice is turn.own and (announced := p.read(p.SubagentUpdate, said)) is not None:
            turn.subagent(announced)
            return
        update = p.read_update(said)
        if update is not None:
            turn.relay(update, voice)
        elif (message := p.read(p.SessionMessage, said)) is not None:
            turn.message(message)
        else:
            kind = said.get("sessionUpdate") if isinstance(said, dict) else None
            log.debug("sub-agent %s: did not show a session/update of kind %s", name, kind)

    def cancel_subagent(self, session_id: str) -> bool:
        """Ask the child to cancel one of its own sub-agents (by the session it announced),
        as the person asked; False unless it runs and the child lets it be cancelled."""
        for turn in self._turns.values():
            voice = turn.others.get(session_id)
            if voice is not None and voice.cancellable and session_id in turn.running:
                assert self._connection is not None
                self._connection.notify(p.SESSION_CANCEL, {"sessionId": session_id})
                log.info("sub-agent %s: asked to cancel %s", self.spec.name, voice.name)
                return True
        return False

    def _speaker(self, method: str, params: dict[str, Any]) -> tuple[Turn | None, Voice | None]:
        """Whose message this is: the task running in the session it names and the voice
        in it, the child itself or one of the sub-agents it announced (the same rules answer
        them); (None, the child) between tasks; (None, None) for a session Raven did not
        open, whose messages are ignored."""
        sid = params.get("sessionId")
        if sid in self._sessions:
            turn = self._turns.get(sid)
            return turn, turn.own if turn else Voice(self.spec.name)
        for turn in self._turns.values():
            if isinstance(sid, str) and (voice := turn.others.get(sid)) is not None:
                return turn, voice
        if sid is None:
            log.info("sub-agent %s: ignored a %s without a sessionId", self.spec.name, method)
        else:
            log.info(
                "sub-agent %s: ignored a %s for a session Raven did not open",
                self.spec.name,
                method,
            )
        return None, None

    async def _permission(
        self, turn: Turn | None, voice: Voice, asked: p.PermissionRequest
    ) -> dict[str, Any]:
        options, call = asked.options, asked.tool_call
        seen = voice.calls.get(call.tool_call_id)
        title = call.title or voice.titles.get(call.tool_call_id) or "a tool call"
        label = call.kind or voice.kinds.get(call.tool_call_id)
        raw_input = call.raw_input or (seen.raw_input if seen else None)
        paths = call.paths() or (seen.paths() if seen else [])
        shown = bool(call.content or (seen.content if seen else None))
        names = (title, call.tool_call_id)
        judged = judge(label, raw_input, paths, self.cwd, names, shown=shown)
        verdict = decide(self.spec, judged, self.cwd)
        by = f"by {verdict.by}"
        if not options:
            chosen = None
        elif verdict.action == "escalate":
            change = call.diff() or (seen.diff() if seen else None)
            chosen, by = await self._escalate(
                turn, voice, options, title, judged, raw_input, change
            )
        else:
            allowed = verdict.action == "allow"
            order = verdict.order
            if self.mode is not None:
                order = grants(self.info.name if self.info else None, order)
            chosen = pick(options, (*order, *REJECT) if allowed else REJECT)
        picked = next((o for o in options if o.option_id == chosen), None)
        what = f"{picked.kind.replace('_', ' ')}" if picked else "cancelled"
        if judged.label is not None and judged.kind != judged.label:
            by += f"; judged {judged.kind}, labelled {judged.label}"
        note = f"{what}: {title} ({by})"
        if turn is not None:
            turn.decisions.append(note)
        log.info("sub-agent %s: %s", self.spec.name, note)
        if chosen is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": chosen}}

    async def _escalate(
        self,
        turn: Turn | None,
        voice: Voice,
        options: list[p.OfferedOption],
        title: str,
        judged: Judged,
        raw_input: dict[str, Any] | None,
        change: p.Diff | None,
    ) -> tuple[str | None, str]:
        """The person's choice, through the parent turn, shown the child's command or its
        change to a file; a reject when nobody can be asked or nobody answers (fail
        closed)."""
        allowed = CONSENT_DECISIONS if judged.consent else ALL_DECISIONS
        offered = tuple(d for d in allowed if any(o.kind == d for o in options))
        if turn is None or turn.approve is None or not offered:
            return pick(options, REJECT), "nobody to ask: rejected"
        kind = judged.kind if judged.kind in ("read", "edit", "execute", "fetch") else "other"
        preview: Preview | None = judged.command
        if preview is None and change is not None:
            preview = FileDiff(Path(change.path), change.old_text, change.new_text)
        decision = await turn.approve(
            Permission(
                key=f"{self.spec.name}:{judged.kind}",
                title=f"{voice.name}: {title}",
                kind=kind,  # type: ignore[arg-type]
                raw_input=raw_input or {},
                offered=offered,
                preview=preview,
                person=True,
            )
        )
        chosen = pick(options, (decision,)) if decision is not None else None
        if chosen is None:
            return pick(options, REJECT), "no answer: rejected"
        return chosen, "by you"

    async def _elicit(
        self, turn: Turn | None, voice: Voice, asked: p.ElicitationRequest
    ) -> dict[str, Any]:
        if asked.mode == "url":
            return await self._consent(turn, voice, asked)
        if self.spec.permissions != "ask" or turn is None or turn.ask is None:
            return {"action": "decline"}
        properties = asked.requested_schema.get("properties")
        fields = list(properties) if isinstance(properties, dict) else []
        if len(fields) != 1:
            return {"action": "decline"}
        answer = await turn.ask(Question(f"{voice.name} asks: {asked.message}"))
        if answer is None:
            return {"action": "decline"}
        return {"action": "accept", "content": {fields[0]: answer}}

    async def _consent(
        self, turn: Turn | None, voice: Voice, asked: p.ElicitationRequest
    ) -> dict[str, Any]:
        """A URL consent (a sign-in, an OAuth grant): accepted only by a person, whatever the
        agent's preset or rules, who is shown the page to open; declined when nobody can
        be asked or nobody answers."""
        title = f"{voice.name}: {asked.message or 'asks for your consent'}"
        accepted, by = False, "nobody to ask"
        if turn is not None and turn.approve is not None and asked.url:
            decision = await turn.approve(
                Permission(
                    key=f"{self.spec.name}:consent",
                    title=title,
                    kind="fetch",
                    raw_input={"url": asked.url},
                    offered=CONSENT_DECISIONS,
                    preview=f"open {asked.url}",
                    person=True,
                )
            )
            accepted = decision == "allow_once"
            by = "no answer" if decision is None else "by you"
        note = f"consent {'accepted' if accepted else 'declined'}: {title} ({by})"
        if turn is not None:
            turn.decisions.append(note)
        log.info("sub-agent %s: %s", self.spec.name, note)
        return {"action": "accept" if accepted else "decline"}

    # -- the mode that asks ----------------------------------------------------------------

    def offers_sandbox(self, session_id: str | None = None) -> bool:
        """Whether the child's session can be asked for a sandbox (`acp.sandbox`)."""
        return (session_id or self._session_id) in self._sandboxes

    async def require_sandbox(self, level: str, session_id: str | None = None) -> None:
        """Require `level` of the child's session (`acp.sandbox`); `SubAgentError` when it
        cannot hold it. Asked once per session and level."""
        sid = session_id or self._session_id
        if self._sandboxes.get(sid) == level:
            return
        params = {"sessionId": sid, "configId": p.SANDBOX_OPTION, "value": level}
        try:
            await self._request(p.SESSION_SET_CONFIG_OPTION, params)
        except SubAgentError as exc:
            raise SubAgentError(
                f"sub-agent {self.spec.name} cannot run in the {level} sandbox: {exc}"
            ) from None
        self._sandboxes[sid] = level
        log.info("sub-agent %s: its session runs in the %s sandbox", self.spec.name, level)

    async def _enter_mode(self, created: Any, session_id: str) -> None:
        """Put a new session (or fork) in the mode that asks, whatever the child's default."""
        options = created.get("configOptions") if isinstance(created, dict) else None
        if isinstance(options, list) and any(
            isinstance(o, dict) and o.get("id") == p.SANDBOX_OPTION for o in options
        ):
            self._sandboxes[session_id] = None
        said = created.get("modes") if isinstance(created, dict) else None
        modes = p.read(p.SessionModes, said) if said is not None else None
        try:
            self.mode = asking_mode(self.spec, modes)
        except NoAskingMode as exc:
            raise SubAgentError(str(exc)) from None
        if modes is not None and self.mode is not None and modes.current_mode_id != self.mode:
            log.info(
                "sub-agent %s: mode %s → %s, so that it asks",
                self.spec.name,
                modes.current_mode_id,
                self.mode,
            )
            await self._set_mode(session_id)

    async def _set_mode(self, session_id: str) -> None:
        await self._request(p.SESSION_SET_MODE, {"sessionId": session_id, "modeId": self.mode})

    def _mode_changed(self, session_id: str, changed: p.ModeChange) -> None:
        """The child switched modes itself (a plan approved, a tool that changes it): Raven
        puts it back, as its rules decide, not the child's own approvals."""
        if self.mode is None or changed.current_mode_id == self.mode or self._stopped_because:
            return
        self._mode_resets += 1
        if self._mode_resets > MAX_MODE_RESETS:
            self._stopped_because = (
                f"sub-agent {self.spec.name} left the mode that asks ({self.mode}) "
                f"{self._mode_resets} times; Raven stopped it rather than let it approve "
                "its own work"
            )
            log.warning("%s", self._stopped_because)
            if self._child is not None:
                self._child.kill_group()
            return
        note = f"put back in mode {self.mode}: it switched itself to {changed.current_mode_id}"
        log.warning("sub-agent %s: %s", self.spec.name, note)
        if (turn := self._turns.get(session_id)) is not None:
            turn.decisions.append(note)

        async def reassert() -> None:
            try:
                await self._set_mode(session_id)
            except SubAgentError as exc:
                log.warning("sub-agent %s: could not put it back: %s", self.spec.name, exc)

        task = asyncio.create_task(reassert())
        self._reasserting.add(task)
        task.add_done_callback(self._reasserting.discard)

    # -- helpers ---------------------------------------------------------------------------

    async def _initialize(self) -> AgentInfo:
        # URL consents always come as such, for a person, rather than as a `fetch`
        # permission request (codex-acp's way when the client does not declare them).
        elicitation: dict[str, Any] = {"url": {}}
        if self.spec.permissions == "ask":
            elicitation["form"] = {}
        # Its own sub-agents come as sessions of their own (`_subagent`), not as its text.
        capabilities: dict[str, Any] = {"elicitation": elicitation, "subagents": {}}
        result = await self._request(
            p.INITIALIZE,
            {
                "protocolVersion": PROTOCOL_VERSION,
                "clientCapabilities": capabilities,
                "clientInfo": {"name": "raven", "title": "Raven", "version": __version__},
            },
        )
        answered = p.read(p.InitializeResult, result)
        if answered is None or answered.protocol_version != PROTOCOL_VERSION:
            got = answered.protocol_version if answered is not None else result
            raise SubAgentError(
                f"sub-agent {self.spec.name} speaks ACP protocol version {got!r}, "
                f"not {PROTOCOL_VERSION}"
            )
        info = answered.agent_info or p.AgentInfo()
        return AgentInfo(
            info.name or self.spec.name,
            info.version or "",
            answered.agent_capabilities,
            info.title or "",
        )

    async def _request(self, method: str, params: dict[str, Any]) -> Any:
        assert self._connection is not None
        try:
            return await self._connection.request(method, params, REQUEST_TIMEOUT_S)
        except ConnectionClosed:
            raise SubAgentError(await self._died()) from None
        except RpcError as exc:
            raise SubAgentError(
                f"sub-agent {self.spec.name} answered {method} with an error: {_said(exc)}"
            ) from None

    async def _cancel(self, request: asyncio.Future[Any], session_id: str) -> None:
        """`session/cancel`, then the process group killed if the prompt has not settled
        (the child's other sessions' tasks with it: they fail as it is gone)."""
        if self._connection is not None:
            with contextlib.suppress(Exception):
                self._connection.notify(p.SESSION_CANCEL, {"sessionId": session_id})
        try:
            settled = await asyncio.wait_for(asyncio.shield(request), CANCEL_GRACE_S)
            stop = (p.read(p.PromptResult, settled) or p.PromptResult()).stop_reason
            log.info("sub-agent %s: cancelled; it answered %s", self.spec.name, stop)
        except BaseException:
            log.info(
                "sub-agent %s: cancelled; no answer within %gs, its processes were killed",
                self.spec.name,
                CANCEL_GRACE_S,
            )
            if self._child is not None:
                self._child.kill_group()
            request.cancel()
            await self.stop()

    async def _died(self) -> str:
        """Why the child went away, once it has (its exit code and the tail of its stderr,
        or why Raven stopped it)."""
        if self._stopped_because is not None:
            return self._stopped_because
        if self._child is None:
            return f"sub-agent {self.spec.name} is gone"
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._child.proc.wait(), CANCEL_GRACE_S)
        return self._child.describe_exit()

    def _tail(self) -> str:
        tail = self._child.stderr_tail if self._child else ""
        return f"; its stderr ends:\n{tail}" if tail else ""


def _said(error: RpcError) -> str:
    """The child's own words for an error: its message, its data, and the code."""
    detail = ""
    if error.data not in (None, "", {}, []):
        data = error.data if isinstance(error.data, str) else json.dumps(error.data)
        detail = f" ({clip(data, MAX_ERROR_DETAIL_CHARS)})"
    return redact(f"{error.message}{detail} [code {error.code}]")
