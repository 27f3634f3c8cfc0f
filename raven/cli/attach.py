"""`raven chat --attach`: the terminal as a UI of a running gateway, through Raven RPC.

Shows the session so far, then follows its log (every UI's turns) with the terminal
view; asks approvals and questions in the terminal and answers them over RPC; Ctrl-C
cancels the turn on the gateway. Never runs a turn itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import aiohttp
from rich.console import Console
from rich.markup import escape

from raven.cli.terminal import LineReader, TerminalAsker, TerminalView
from raven.engine import ApprovalRequest, Notice, Question, TurnStarted
from raven.errors import RavenError
from raven.events_json import event_from_json
from raven.messages import TextPart

PROMPT = "› "
CALL_TIMEOUT_S = 30.0
REPLAY_MESSAGES = 20
"""How much of an attached session's older transcript is shown before its recent turns."""


class AttachError(RavenError):
    """The gateway cannot be reached, refused us, or answered with an error."""


class Refused(AttachError):
    """The gateway answered a call with its error (a turn already runs, the session is
    closed); the connection is fine."""


class Remote:
    """A Raven RPC connection: calls by id, notifications to one handler."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, on_note: Any) -> None:
        self._ws = ws
        self._on_note = on_note
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self.reading = asyncio.create_task(self._read())

    async def call(self, method: str, **params: Any) -> Any:
        request_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        frame = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        await self._ws.send_str(json.dumps(frame))
        try:
            reply = await asyncio.wait_for(future, CALL_TIMEOUT_S)
        finally:
            self._waiting.pop(request_id, None)
        if "error" in reply:
            raise Refused(f"{method}: {reply['error'].get('message')}")
        return reply["result"]

    async def _read(self) -> None:
        async for message in self._ws:
            if message.type != aiohttp.WSMsgType.TEXT:
                continue
            frame = json.loads(message.data)
            if "method" in frame:
                self._on_note(frame["method"], frame.get("params") or {})
            elif (future := self._waiting.get(frame.get("id"))) is not None and not future.done():
                future.set_result(frame)
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(AttachError("the gateway closed the connection"))


async def attach(url: str, token: str, cwd: Path, session_id: str | None) -> None:
    """Chat through the gateway at `url` until end of input or /quit."""
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

    def on_note(method: str, params: dict[str, Any]) -> None:
        if method == "session.event" and params.get("sessionId") == state.get("session"):
            show(params.get("event") or {})
            if (params.get("event") or {}).get("type") == "TurnEnded":
                state["ended"].set()
        elif method in ("permission.requested", "question.asked"):
            if params.get("sessionId") == state.get("session"):  # not other sessions' turns
                state["questions"].put_nowait((method, params))
        elif method == "request.settled" and isinstance(params.get("requestId"), str):
            settled.setdefault(params["requestId"], asyncio.Event()).set()

    rpc_url = url.rstrip("/").replace("http", "ws", 1) + "/rpc"
    headers = {"Authorization": f"Bearer {token}"}
    async with aiohttp.ClientSession() as http:
        try:
            ws = await http.ws_connect(rpc_url, headers=headers)
        except (aiohttp.ClientError, OSError) as exc:
            raise AttachError(f"cannot attach to the gateway at {url}: {exc}") from None
        remote = Remote(ws, on_note)
        if session_id:
            state["session"] = session_id
            # The session so far (a turn running in another UI included), then what follows.
            detail = await remote.call(
                "session.get", sessionId=session_id, historyLimit=REPLAY_MESSAGES
            )
            err.print(f"[bold]raven[/] · attached to {url} · session {session_id}")
            for body in detail["history"]:
                show(body)
            view.pause()
            await remote.call("session.subscribe", sessionId=session_id, after=detail["cursor"])
        else:
            created = await remote.call("session.create", cwd=str(cwd))
            session_id = state["session"] = str(created["sessionId"])
            err.print(f"[bold]raven[/] · attached to {url} · session {session_id}")
        answering = asyncio.create_task(_answer(remote, asker, view, state["questions"], settled))
        try:
            await _loop(remote, reader, out, view, session_id, state)
        finally:
            answering.cancel()
            await ws.close()
            with contextlib.suppress(Exception):
                await remote.reading


async def _loop(
    remote: Remote,
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
            task = asyncio.create_task(remote.call("turn.cancel", sessionId=session_id))
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
                await remote.call("turn.send", sessionId=session_id, text=line)
            except Refused as exc:  # another UI's turn runs, say: not sent, and ask again
                state.pop("sent", None)
                turn_running = False
                view(Notice(f"not sent: {str(exc).removeprefix('turn.send: ')}"))
                continue
            await ended.wait()  # the turn's end comes as an event; no deadline: a person waits
            turn_running = False
            view.pause()
    finally:
        loop.remove_signal_handler(signal.SIGINT)


async def _answer(
    remote: Remote,
    asker: TerminalAsker,
    view: TerminalView,
    questions: asyncio.Queue[Any],
    settled: dict[str, asyncio.Event],
) -> None:
    """Ask each of the gateway's questions in the terminal and send the answer back; one
    another UI answers first (`request.settled`) stops being asked here."""
    while True:
        method, params = await questions.get()
        request_id = params["requestId"]
        done = settled.setdefault(request_id, asyncio.Event())
        asking = asyncio.create_task(_ask(asker, method, params))
        elsewhere = asyncio.create_task(done.wait())
        try:
            await asyncio.wait({asking, elsewhere}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (asking, elsewhere):
                task.cancel()
            settled.pop(request_id, None)
        if not asking.done() or asking.cancelled():
            view(Notice("answered in another UI"))
            continue
        respond, field = (
            ("permission.respond", "decision")
            if method == "permission.requested"
            else ("question.respond", "answer")
        )
        with contextlib.suppress(Refused):  # another UI answered the same moment
            await remote.call(respond, requestId=request_id, **{field: asking.result()})


async def _ask(asker: TerminalAsker, method: str, params: dict[str, Any]) -> Any:
    """One question of the gateway asked in the terminal; the answer to send back."""
    if method == "permission.requested":
        request = ApprovalRequest(
            params["callId"],
            params["title"],
            params["title"],
            params["kind"],
            params.get("rawInput") or {},
            offered=tuple(params["offered"]),
        )
        decision = await asker.approve(request)
        # not answered here: no is all the gateway takes
        return decision if decision in request.offered else "reject_once"
    return await asker.ask(Question(params["text"], tuple(params.get("choices", []))))
