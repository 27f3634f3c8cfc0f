"""A small ACP agent on the official ACP Python SDK, for driving from Raven's ACP client.

Its behaviour is the first argument:
  allow-once   asks permission for an edit offering only allow_once; answers with the outcome
  reject-only  asks permission offering only reject options
  read-exec    asks for an execute call, then for a read call; reports both outcomes
  crash        starts a tool call, writes to stderr, then exits 3 mid-turn
  flood        writes 1 MiB to stderr, then answers
  hang         never answers a prompt until session/cancel, then answers `cancelled` ("stubborn":
               ignores the cancel)
  elicit       asks an elicitation question and answers with what it got
  grandchild   announces one of its own sub-agents (`subagent_update`; the SDK does not pass
               on whether the client declared them), sends it its task (`session_message`),
               streams its text and a tool call under its session, ends it, then answers
  cancellable-grandchild  announces a sub-agent of its own that may be cancelled on its own
               (`capabilities.cancel`), then waits (20 s at most) for a session/cancel of it:
               ends it `cancelled`, its own session going on, and answers "writer cancelled"
  late-grandchild  announces a sub-agent of its own and answers the prompt at once, as codex
               does; a moment later that sub-agent asks to write late.txt under its own
               session, writes it if allowed, and ends ("stuck": it never ends; "dies": the
               agent exits instead). Its updates are partial, as codex's are: the title
               first, then the state, then its cwd; after it ends, its capabilities
  url-consent  asks for a URL consent (a sign-in), as codex-acp relays an MCP server's, if
               the client declared URL elicitation; answers with the action it got
  fs           tries to read a file through the client
  foreign      sends updates and a permission request for a session Raven never opened,
               a notification and an update kind Raven does not know, and a permission
               request with no sessionId
  chatty       streams CHATTY_MIB MiB of answer text, 1 MiB an update
  refuse       answers the prompt with a JSON-RPC error carrying data
  retitle      starts a tool call under a placeholder title, then names it in an update
  requests     asks permission for each tool call of the JSON list in the second argument
               ({"title", "kind", "rawInput", "locations", "diffs"}), offering all four options;
               answers with each outcome
  modes        starts its sessions in `auto` (it declares auto, default, plan); on a prompt
               switches itself back to `auto`, waits to be put back, and answers with the
               mode it was prompted in and the one it is in after ("stubborn": switches
               back to `auto` whenever it is put in another mode, and never answers)
  self-approving  declares only modes that approve by themselves (auto, yolo)
  served       says what it will do, runs `make test` (a tool call it asks permission for),
               plans, and answers with the outcome and the prompt's first line, reporting
               its usage and what its session was asked before; serves session/resume,
               its sessions kept in `served-sessions.json` in its working directory, so a
               new process resuming a session knows what it was asked
  forks        serves session/fork and session/close ("no-fork": neither); a fork knows its
               session's tasks and starts in `auto` (it declares auto, default). A prompt
               saying "hold" says "holding" and waits (HOLD_S, 20 s at most) until a prompt
               runs in another session; every prompt answers with its session, mode, pid,
               the tasks that session was given, and the sessions closed so far
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

import acp
from acp import schema

BEHAVIOUR = sys.argv[1]
STUBBORN = "stubborn" in sys.argv[2:]
STUCK = "stuck" in sys.argv[2:]
DIES = "dies" in sys.argv[2:]
NO_FORK = "no-fork" in sys.argv[2:]
DECLARED_MODES = {
    "modes": ["auto", "default", "plan"],
    "self-approving": ["auto", "yolo"],
    "forks": ["auto", "default"],
}
RAW_INPUTS: dict[str, dict[str, Any]] = {
    "edit": {"path": "notes.txt", "content": "hi"},
    "execute": {"command": "make test"},
    "read": {"path": "notes.txt"},
}


SERVED_SESSIONS = "served-sessions.json"


def served_sessions() -> dict[str, list[str]]:
    """What each session of `served` was asked, by any of its processes."""
    try:
        with open(SERVED_SESSIONS) as fh:
            kept: dict[str, list[str]] = json.load(fh)
    except FileNotFoundError:
        return {}
    return kept


def option(kind: str) -> schema.PermissionOption:
    return schema.PermissionOption(option_id=f"opt-{kind}", name=kind, kind=kind)


class Agent:
    def __init__(self) -> None:
        self.conn: Any = None
        self.mode = "auto"
        self.mode_set = asyncio.Event()
        self.modes: dict[str, str] = {}
        """Each session's mode, as it was set (`forks`)."""
        self.tasks: dict[str, list[str]] = {}
        """What each session was asked, in order (`forks`)."""
        self.closed: list[str] = []
        self.cancelled: set[str] = set()
        self.cancel_came = asyncio.Event()
        self.prompting: dict[str, asyncio.Task[Any]] = {}
        """Each session's running prompt, for `cancel`."""
        self.beside = asyncio.Event()
        """A prompt runs in a session other than the one holding (`forks`)."""

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
        declared = kwargs.get("client_capabilities")
        elicitation = declared.elicitation if declared is not None else None
        self.url_elicitation = elicitation is not None and elicitation.url is not None
        capabilities = None
        if BEHAVIOUR == "served":
            sessions = schema.SessionCapabilities(resume=schema.SessionResumeCapabilities())
            capabilities = schema.AgentCapabilities(session_capabilities=sessions)
        if BEHAVIOUR == "forks" and not NO_FORK:
            sessions = schema.SessionCapabilities(
                fork=schema.SessionForkCapabilities(), close=schema.SessionCloseCapabilities()
            )
            capabilities = schema.AgentCapabilities(session_capabilities=sessions)
        return schema.InitializeResponse(
            protocol_version=1,
            agent_info=schema.Implementation(name="sdk-test-agent", version="9.9"),
            agent_capabilities=capabilities,
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        if BEHAVIOUR == "served":  # one id per session, across its processes
            return schema.NewSessionResponse(session_id=f"s-{os.urandom(4).hex()}")
        declared = DECLARED_MODES.get(BEHAVIOUR)
        if declared is None:
            return schema.NewSessionResponse(session_id="s1")
        self.modes["s1"], self.tasks["s1"] = self.mode, []
        return schema.NewSessionResponse(session_id="s1", modes=self.declared("s1"))

    def declared(self, session_id: str) -> schema.SessionModeState:
        return schema.SessionModeState(
            current_mode_id=self.modes[session_id],
            available_modes=[
                schema.SessionMode(id=m, name=m.title()) for m in DECLARED_MODES[BEHAVIOUR]
            ],
        )

    async def resume_session(
        self, session_id: str, cwd: str, **kwargs: Any
    ) -> schema.ResumeSessionResponse:
        if session_id not in served_sessions():
            raise acp.RequestError(-32002, "Resource not found", {"sessionId": session_id})
        return schema.ResumeSessionResponse()

    async def fork_session(
        self, session_id: str, cwd: str, **kwargs: Any
    ) -> schema.ForkSessionResponse:
        forked = f"s{len(self.tasks) + 1}"
        self.modes[forked], self.tasks[forked] = "auto", list(self.tasks[session_id])
        return schema.ForkSessionResponse(session_id=forked, modes=self.declared(forked))

    async def close_session(self, session_id: str, **kwargs: Any) -> None:
        self.closed.append(session_id)

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> schema.SetSessionModeResponse:
        self.mode = self.modes[session_id] = mode_id
        self.mode_set.set()
        if STUBBORN and BEHAVIOUR == "modes":  # back to auto, whatever it is told
            asyncio.get_running_loop().call_soon(asyncio.ensure_future, self.to_auto(session_id))
        return schema.SetSessionModeResponse()

    async def to_auto(self, session_id: str) -> None:
        self.mode = "auto"
        switched = schema.CurrentModeUpdate(
            session_update="current_mode_update", current_mode_id="auto"
        )
        await self.conn.session_update(session_id, switched)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.add(session_id)
        self.cancel_came.set()
        prompting = self.prompting.get(session_id)
        if prompting is not None and not STUBBORN:
            prompting.cancel()

    async def served(self, session_id: str, prompt: Any) -> schema.PromptResponse:
        asked = prompt[0].text.splitlines()[0]
        kept = served_sessions()
        kept.setdefault(session_id, []).append(asked)
        with open(SERVED_SESSIONS, "w") as fh:
            json.dump(kept, fh)
        await self.say(session_id, "I will run the tests. ")
        plan = schema.AgentPlanUpdate(
            session_update="plan",
            entries=[
                schema.PlanEntry(content="run make test", status="in_progress", priority="high")
            ],
        )
        await self.conn.session_update(session_id, plan)
        start = acp.start_tool_call("c1", "Run make test", kind="execute", status="pending")
        await self.conn.session_update(session_id, start)
        call = schema.ToolCallUpdate(
            tool_call_id="c1",
            title="Run make test",
            kind="execute",
            raw_input=RAW_INPUTS["execute"],
        )
        kinds = ["allow_once", "allow_always", "reject_once", "reject_always"]
        result = await self.conn.request_permission(
            session_id=session_id, tool_call=call, options=[option(k) for k in kinds]
        )
        outcome = getattr(result.outcome, "option_id", None) or result.outcome.outcome
        status = "completed" if outcome in ("opt-allow_once", "opt-allow_always") else "failed"
        await self.conn.session_update(session_id, acp.update_tool_call("c1", status=status))
        await self.say(session_id, f"Outcome {outcome}. ")
        await self.say(session_id, f"Asked so far: {' | '.join(kept[session_id])}")
        usage = schema.Usage(input_tokens=120, output_tokens=30, total_tokens=150)
        return schema.PromptResponse(stop_reason="end_turn", usage=usage)

    async def say(self, session_id: str, text: str) -> None:
        await self.conn.session_update(session_id, acp.update_agent_message_text(text))

    async def ask(self, session_id: str, call_id: str, kind: str, kinds: list[str]) -> str:
        await self.conn.session_update(
            session_id, acp.start_tool_call(call_id, f"Do {kind}", kind=kind, status="pending")
        )
        call = schema.ToolCallUpdate(
            tool_call_id=call_id, title=f"Do {kind}", kind=kind, raw_input=RAW_INPUTS[kind]
        )
        result = await self.conn.request_permission(
            session_id=session_id, tool_call=call, options=[option(k) for k in kinds]
        )
        outcome = result.outcome
        return getattr(outcome, "option_id", None) or outcome.outcome

    async def prompt(self, session_id: str, prompt: Any, **kwargs: Any) -> schema.PromptResponse:
        if BEHAVIOUR == "allow-once":
            got = await self.ask(session_id, "c1", "edit", ["allow_once", "reject_once"])
            await self.say(session_id, f"outcome {got}")
        elif BEHAVIOUR == "reject-only":
            got = await self.ask(session_id, "c1", "edit", ["reject_once", "reject_always"])
            await self.say(session_id, f"outcome {got}")
        elif BEHAVIOUR == "read-exec":
            kinds = ["allow_once", "allow_always", "reject_once", "reject_always"]
            first = await self.ask(session_id, "c1", "execute", kinds)
            second = await self.ask(session_id, "c2", "read", kinds)
            await self.say(session_id, f"execute {first}, read {second}")
        elif BEHAVIOUR == "requests":
            kinds = ["allow_once", "allow_always", "reject_once", "reject_always"]
            outcomes = []
            for n, call in enumerate(json.loads(sys.argv[2])):
                locations = [schema.ToolCallLocation(path=p) for p in call.get("locations", [])]
                changes = [
                    schema.FileEditToolCallContent(
                        type="diff",
                        path=d["path"],
                        old_text=d.get("oldText"),
                        new_text=d["newText"],
                    )
                    for d in call.get("diffs", [])
                ]
                update = schema.ToolCallUpdate(
                    tool_call_id=f"c{n}",
                    title=call["title"],
                    kind=call.get("kind"),
                    raw_input=call.get("rawInput"),
                    locations=locations or None,
                    content=changes or None,
                )
                result = await self.conn.request_permission(
                    session_id=session_id, tool_call=update, options=[option(k) for k in kinds]
                )
                outcome = result.outcome
                outcomes.append(getattr(outcome, "option_id", None) or outcome.outcome)
            await self.say(session_id, ", ".join(outcomes))
        elif BEHAVIOUR == "served":
            return await self.served(session_id, prompt)
        elif BEHAVIOUR == "modes":
            prompted_in = self.mode
            self.mode_set.clear()
            await self.to_auto(session_id)  # as after a plan it was let out of
            await asyncio.wait_for(self.mode_set.wait(), 10)
            if STUBBORN:
                await asyncio.Event().wait()  # until Raven gives up on it
            await self.say(session_id, f"prompted in {prompted_in}, then in {self.mode}")
        elif BEHAVIOUR == "crash":
            await self.conn.session_update(session_id, acp.start_tool_call("c1", "Work"))
            sys.stderr.write("fatal: the disk caught fire\n")
            sys.stderr.flush()
            os._exit(3)
        elif BEHAVIOUR == "flood":
            for _ in range(1024):
                sys.stderr.write("x" * 1023 + "\n")
            sys.stderr.flush()
            await self.say(session_id, "survived the flood")
        elif BEHAVIOUR == "hang":
            task = self.prompting[session_id] = asyncio.current_task()  # type: ignore[assignment]
            with open(os.environ["HANG_PIDFILE"], "w") as fh:
                fh.write(str(os.getpid()))
            while True:
                try:
                    await asyncio.sleep(3600)
                except asyncio.CancelledError:
                    if not STUBBORN:
                        task.uncancel()
                        return schema.PromptResponse(stop_reason="cancelled")
        elif BEHAVIOUR == "retitle":
            start = acp.start_tool_call("c1", "write_file__write_file_1f3a", status="pending")
            await self.conn.session_update(session_id, start)
            named = acp.update_tool_call("c1", title="Write notes.txt", status="in_progress")
            await self.conn.session_update(session_id, named)
            await self.conn.session_update(
                session_id, acp.update_tool_call("c1", status="completed")
            )
            await self.say(session_id, "wrote it")
        elif BEHAVIOUR == "refuse":
            raise acp.RequestError(-32602, "Invalid params", {"clientInfo": "version missing"})
        elif BEHAVIOUR == "chatty":
            for i in range(int(os.environ["CHATTY_MIB"])):
                await self.say(session_id, chr(ord("a") + i % 26) * (1024 * 1024))
        elif BEHAVIOUR == "foreign":
            await self.say("someone-else", "INJECTED ")
            asked = await self.conn.request_permission(
                session_id="someone-else",
                tool_call=schema.ToolCallUpdate(tool_call_id="x", title="Do edit", kind="edit"),
                options=[option("allow_once")],
            )
            # Frames of today's ACP Raven does not act on, and a request naming no session.
            wire = self.conn._conn
            await wire.send_notification("_vendor/hello", {"sessionId": session_id})
            update = {"sessionUpdate": "subagent_update", "state": "running"}
            await wire.send_notification(
                "session/update", {"sessionId": session_id, "update": update}
            )
            nameless = await wire.send_request("session/request_permission", {"options": []})
            said = f"{asked.outcome.outcome}, nameless {nameless['outcome']['outcome']}"
            await self.say(session_id, f"own words, foreign ask {said}")
        elif BEHAVIOUR == "fs":
            try:
                await self.conn.read_text_file(path="/etc/hostname", session_id=session_id)
                got = "read it"
            except acp.RequestError as exc:
                got = f"refused {exc.code}"
            await self.say(session_id, got)
        elif BEHAVIOUR == "elicit":
            schema_ = schema.ElicitationSchema(
                type="object", properties={"colour": {"type": "string", "title": "Colour"}}
            )
            result = await self.conn.create_elicitation(
                "Which colour?",
                mode=schema.ElicitationFormSessionMode(
                    mode="form", session_id=session_id, requested_schema=schema_
                ),
            )
            await self.say(
                session_id, f"elicitation {result.action} {getattr(result, 'content', None)}"
            )
        elif BEHAVIOUR == "grandchild":
            wire, child = self.conn._conn, f"{session_id}/task-1"

            async def update(sid: str, body: dict[str, Any]) -> None:
                await wire.send_notification("session/update", {"sessionId": sid, "update": body})

            announce = {"sessionUpdate": "subagent_update", "sessionId": child}
            await update(session_id, {**announce, "title": "writer", "description": "say hello",
                                      "state": {"state": "running"}})  # fmt: skip
            task = [{"type": "text", "text": "Task for writer:\nsay hello"}]
            await update(session_id, {"sessionUpdate": "session_message", "messageId": "m1",
                                      "senderSessionId": session_id, "recipientSessionId": child,
                                      "content": task})  # fmt: skip
            text = {"type": "text", "text": "Grandchild says hello."}
            await update(child, {"sessionUpdate": "agent_message_chunk", "content": text})
            call = {"toolCallId": "t1", "title": "Read notes.txt", "kind": "read"}
            await update(child, {"sessionUpdate": "tool_call", "status": "pending", **call})
            await update(session_id, {**announce, "state": {"state": "idle",
                                                            "stopReason": "end_turn"}})  # fmt: skip
            await self.say(session_id, "Done.")
        elif BEHAVIOUR == "cancellable-grandchild":
            wire, child = self.conn._conn, f"{session_id}/writer"
            tree = {"sessionUpdate": "subagent_update", "sessionId": child}

            async def announce(**changed: Any) -> None:
                said = {"sessionId": session_id, "update": {**tree, **changed}}
                await wire.send_notification("session/update", said)

            await announce(title="writer", state={"state": "running"}, capabilities={"cancel": {}})
            async with asyncio.timeout(20):
                while child not in self.cancelled:
                    self.cancel_came.clear()
                    await self.cancel_came.wait()
            await announce(capabilities=None, state={"state": "idle", "stopReason": "cancelled"})
            await self.say(session_id, "writer cancelled")
        elif BEHAVIOUR == "late-grandchild":
            self.late = asyncio.create_task(self.late_grandchild(session_id))
            await self.say(session_id, "Started a writer.")
        elif BEHAVIOUR == "forks":
            (text,) = [block.text for block in prompt]
            self.tasks[session_id].append(text)
            if "hold" in text:
                self.beside.clear()
                await self.say(session_id, "holding\n")
                try:
                    await asyncio.wait_for(self.beside.wait(), float(os.environ.get("HOLD_S", 20)))
                except TimeoutError:
                    await self.say(session_id, "alone; ")
            else:
                self.beside.set()
            known = ", ".join(self.tasks[session_id])
            closed = ", ".join(self.closed) or "none"
            mode, pid = self.modes[session_id], os.getpid()
            await self.say(session_id, f"{session_id} in {mode}, pid {pid}, knows: {known}; "
                           f"closed: {closed}")  # fmt: skip
        elif BEHAVIOUR == "url-consent":
            if not self.url_elicitation:
                await self.say(session_id, "no URL elicitation declared")
                return schema.PromptResponse(stop_reason="end_turn")
            url = "https://github.com/login/oauth/authorize?client_id=raven-test"
            mode = schema.ElicitationUrlSessionMode(
                mode="url", session_id=session_id, elicitation_id="e1", url=url
            )
            result = await self.conn.create_elicitation("Sign in to GitHub", mode=mode)
            if result.action == "accept":
                await self.conn.complete_elicitation("e1")
            await self.say(session_id, f"consent {result.action}")
        return schema.PromptResponse(stop_reason="end_turn")

    async def late_grandchild(self, session_id: str) -> None:
        wire, child = self.conn._conn, f"{session_id}/writer"
        announce = {"sessionUpdate": "subagent_update", "sessionId": child}

        async def update(**changed: Any) -> None:
            said = {"sessionId": session_id, "update": {**announce, **changed}}
            await wire.send_notification("session/update", said)

        await update(title="writer")
        await update(state={"state": "running"})
        await update(cwd=os.getcwd())
        # The parent's answer goes out first (the SDK sends it once prompt returns); the
        # writer's request comes after it, as codex's spawned agent's did (0.08 s after).
        await asyncio.sleep(0.1)
        if DIES:
            os._exit(0)
        edit = schema.ToolCallUpdate(
            tool_call_id="w1",
            title="Write late.txt",
            kind="edit",
            raw_input={"path": "late.txt", "content": "late"},
        )
        kinds = ["allow_once", "reject_once"]
        result = await self.conn.request_permission(
            session_id=child, tool_call=edit, options=[option(k) for k in kinds]
        )
        if result.outcome.outcome == "selected" and "allow" in result.outcome.option_id:
            with open("late.txt", "w") as written:
                written.write("late")
        if not STUCK:
            await update(state={"state": "idle", "stopReason": "end_turn"})
            await update(capabilities={})


if __name__ == "__main__":
    asyncio.run(acp.run_agent(Agent(), use_unstable_protocol=True))
