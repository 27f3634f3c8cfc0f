"""`raven chat --attach`: the terminal as a UI of a running gateway, through Raven RPC.

Shows the session so far, then follows its log (every UI's turns) with the terminal
view; asks approvals and questions in the terminal and answers them over RPC; Ctrl-C
cancels the turn on the gateway. Never runs a turn itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from raven.engine import ApprovalRequest, FileDiff, Notice, Preview, Question, TurnStarted
from raven.engine.codec import event_from_json
from raven.messages import TextPart
from raven.rpc import contract as c
from raven.rpc.client import Refused, RpcClient
from raven.terminal.asker import TerminalAsker
from raven.terminal.reader import LineReader
from raven.terminal.view import TerminalView

PROMPT = "› "
REPLAY_MESSAGES = 20
"""How much of an attached session's older transcript is shown before its recent turns."""


async def attach(url: str, token: str, cwd: Path, session_id: str | None) -> None:
    """Chat through the gateway at `url` until end of input or /quit; raises
    `GatewayUnreachable` or `Refused` (the session is unknown or closed, say)."""
    out = Console(file=sys.stdout, highlight=False)
    err = Console(file=sys.stderr, highlight=False, soft_wrap=True)
    view = TerminalView(out, err, markdown=True)
    reader = LineReader()
    asker = TerminalAsker(err, reader, view, interactive=True)
    state: dict[str, Any] = {"ended": asyncio.Event(), "questions": asyncio.Queue()}
    settled: dict[str, asyncio.Event] = {}

    def show(body: dict[str, Any]) -> None:
        event = event_from_json(body)
        if isinstance(event, TurnStarted):
            if state.pop("sent", False):
                return  # this chat's own prompt: already on the screen
            view.pause()
            text = " ".join(p.text for p in event.parts if isinstance(p, TextPart))
            out.print(f"[dim]{escape(PROMPT + text)}[/]")
        elif event is not None:
            view(event)

    def on_note(method: str, note: c.Wire) -> None:
        if isinstance(note, c.SessionEventNote) and note.session_id == state.get("session"):
            show(note.event)
            if note.event.get("type") == "TurnEnded":
                state["ended"].set()
        elif isinstance(note, c.PermissionRequested | c.QuestionAsked):
            if note.session_id == state.get("session"):  # not other sessions' turns
                state["questions"].put_nowait(note)
        elif isinstance(note, c.RequestSettled):
            settled.setdefault(note.request_id, asyncio.Event()).set()

    async with RpcClient.connect(url, token, on_note) as remote:
        if session_id:
            state["session"] = session_id
            # The session so far (a turn running in another UI included), then what follows.
            asked = c.SessionGet(session_id=session_id, history_limit=REPLAY_MESSAGES)
            detail: c.SessionDetail = await remote.call("session.get", asked)
            err.print(f"[bold]raven[/] · attached to {escape(url)} · session {escape(session_id)}")
            for body in detail.history:
                show(body)
            view.pause()
            follow = c.SessionSubscribe(session_id=session_id, after=detail.cursor)
            await remote.call("session.subscribe", follow)
        else:
            created: c.SessionInfo = await remote.call(
                "session.create", c.SessionCreate(cwd=str(cwd))
            )
            session_id = state["session"] = created.session_id
            err.print(f"[bold]raven[/] · attached to {escape(url)} · session {escape(session_id)}")
        answering = asyncio.create_task(_answer(remote, asker, view, state["questions"], settled))
        try:
            await _loop(remote, reader, out, view, session_id, state)
        finally:
            answering.cancel()


async def _loop(
    remote: RpcClient,
    reader: LineReader,
    out: Console,
    view: TerminalView,
    session_id: str,
    state: dict[str, Any],
) -> None:
    import signal

    ended: asyncio.Event = state["ended"]
    loop = asyncio.get_running_loop()
    turn_running = False
    cancels: set[asyncio.Task[Any]] = set()

    def interrupt() -> None:
        if turn_running:
            task = asyncio.create_task(
                remote.call("turn.cancel", c.SessionRef(session_id=session_id))
            )
            cancels.add(task)
            task.add_done_callback(cancels.discard)

    loop.add_signal_handler(signal.SIGINT, interrupt)
    try:
        while True:
            out.print(PROMPT, end="")
            line = await reader.readline()
            if line is None or line.strip() in ("/quit", "/exit"):
                return
            if not line.strip():
                continue
            ended.clear()
            turn_running = True
            view.waiting()
            state["sent"] = True
            try:
                await remote.call("turn.send", c.TurnSend(session_id=session_id, text=line))
            except Refused as exc:  # another UI's turn runs, say: not sent, and ask again
                state.pop("sent", None)
                turn_running = False
                view(Notice(f"not sent: {exc.reason}"))
                continue
            await ended.wait()  # the turn's end comes as an event; no deadline: a person waits
            turn_running = False
            view.pause()
    finally:
        loop.remove_signal_handler(signal.SIGINT)


async def _answer(
    remote: RpcClient,
    asker: TerminalAsker,
    view: TerminalView,
    questions: asyncio.Queue[c.PermissionRequested | c.QuestionAsked],
    settled: dict[str, asyncio.Event],
) -> None:
    """Ask each of the gateway's questions in the terminal and send the answer back; one
    another UI answers first (`request.settled`) stops being asked here."""
    while True:
        note = await questions.get()
        done = settled.setdefault(note.request_id, asyncio.Event())
        asking = asyncio.create_task(_ask(asker, note))
        elsewhere = asyncio.create_task(done.wait())
        try:
            await asyncio.wait({asking, elsewhere}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (asking, elsewhere):
                task.cancel()
            settled.pop(note.request_id, None)
        if not asking.done() or asking.cancelled():
            view(Notice("answered in another UI"))
            continue
        answer: c.Wire
        if isinstance(note, c.PermissionRequested):
            answer = c.PermissionRespond(request_id=note.request_id, decision=asking.result())
            method = "permission.respond"
        else:
            answer = c.QuestionRespond(request_id=note.request_id, answer=asking.result())
            method = "question.respond"
        with contextlib.suppress(Refused):  # another UI answered the same moment
            await remote.call(method, answer)


async def _ask(asker: TerminalAsker, note: c.PermissionRequested | c.QuestionAsked) -> Any:
    """One question of the gateway asked in the terminal; the answer to send back."""
    if isinstance(note, c.PermissionRequested):
        offered = tuple(note.offered)
        diff = note.preview_diff
        preview: Preview | None = note.preview_text
        if diff is not None:
            preview = FileDiff(Path(diff.path), diff.old_text, diff.new_text)
        request = ApprovalRequest(
            note.call_id,
            note.title,
            note.title,
            note.kind,
            note.raw_input,
            offered=offered,
            preview=preview,
        )
        decision = await asker.approve(request)
        # not answered here: no is all the gateway takes
        return decision if decision in offered else "reject_once"
    return await asker.ask(Question(note.text, tuple(note.choices)))
