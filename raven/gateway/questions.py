"""What the sessions' turns wait on, for this gateway's UIs: approvals and questions.

Those a turn here asks (`HubAsker`) are announced to every UI and answered by whichever
answers first. Those a turn on another replica asks are read from the session's log
(`Asking`, `Answered`) while a UI here follows it, announced the same way, and a UI's
answer goes to that turn through the engine (`Runtime.answer`). Each is announced once
and settled once. Never runs a turn; sends nothing but through `broadcast`.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from raven.engine import (
    Answered,
    ApprovalRequest,
    Asking,
    Decision,
    FileDiff,
    LiveSession,
    Logged,
    Question,
    Runtime,
)
from raven.jsonrpc import RpcError
from raven.rpc import contract as c

Broadcast = Callable[[str, c.Wire], None]
MAX_REMEMBERED = 1024
"""Request ids asked here that the log may still bring back (read back after the asking)."""


class Questions:
    def __init__(self, runtime: Runtime, broadcast: Broadcast) -> None:
        self._runtime = runtime
        self._broadcast = broadcast
        self._local: dict[str, tuple[str, asyncio.Future[Any], dict[str, Any]]] = {}
        """request id → (session id, the answer to come, the announcement)."""
        self._remote: dict[str, tuple[str, dict[str, Any]]] = {}
        """request id → (session id, the announcement) of an asking elsewhere."""
        self._mine: OrderedDict[str, None] = OrderedDict()
        self._ids = itertools.count(1)

    async def ask(self, session_id: str, note: c.Wire, method: str) -> Any:
        """Announce an asking of a turn here to every UI; the first answer wins."""
        request_id = getattr(note, "request_id", "") or f"r{next(self._ids)}"
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        note = note.model_copy(update={"request_id": request_id})
        announced = {"method": method, **note.model_dump(mode="json", by_alias=True)}
        self._local[request_id] = (session_id, future, announced)
        self._mine[request_id] = None
        while len(self._mine) > MAX_REMEMBERED:
            self._mine.popitem(last=False)
        try:
            self._broadcast(method, note)
            return await future
        finally:
            self._local.pop(request_id, None)
            self._broadcast("request.settled", c.RequestSettled(request_id=request_id))

    async def settle(self, request_id: str, value: Any) -> None:
        """A UI's answer: to the asking here, or to the turn on another replica."""
        local = self._local.get(request_id)
        if local is not None and not local[1].done():
            local[1].set_result(value)
            return
        remote = self._remote.get(request_id)
        if remote is not None and await self._runtime.answer(remote[0], request_id, value):
            return
        raise RpcError(c.Code.REQUEST_NOT_FOUND, f"No pending request {request_id}")

    def waiting(self, session_id: str) -> list[dict[str, Any]]:
        """The announcements of what the session's turn still waits for."""
        here = [note for sid, _, note in self._local.values() if sid == session_id]
        return here + [note for sid, note in self._remote.values() if sid == session_id]

    def heard(self, live: LiveSession, entry: Logged) -> None:
        """An event of a session a UI here follows: an asking elsewhere begins or ends (a
        turn running here announces its own, through its asker)."""
        event, session_id = entry.event, live.id
        if isinstance(event, Asking) and event.request_id not in self._mine and not live.is_busy:
            if event.request_id not in self._remote:
                method, note = _announcement(session_id, event)
                announced = {"method": method, **note.model_dump(mode="json", by_alias=True)}
                self._remote[event.request_id] = (session_id, announced)
                self._broadcast(method, note)
        elif isinstance(event, Answered) and event.request_id in self._remote:
            del self._remote[event.request_id]
            self._broadcast("request.settled", c.RequestSettled(request_id=event.request_id))

    def known(self, live: LiveSession, logged: list[Logged]) -> None:
        """What a session's log holds when a UI here begins following it: its askings not
        yet answered are announced."""
        answered = {e.event.request_id for e in logged if isinstance(e.event, Answered)}
        for entry in logged:
            if isinstance(entry.event, Asking) and entry.event.request_id not in answered:
                self.heard(live, entry)

    def forget(self, session_id: str) -> None:
        """No UI here follows the session any more: its askings elsewhere are not shown."""
        for request_id, (sid, _) in list(self._remote.items()):
            if sid == session_id:
                del self._remote[request_id]


class HubAsker:
    """Approvals and questions of a turn here, answered by whichever UI answers first."""

    def __init__(self, questions: Questions, session_id: str) -> None:
        self._questions = questions
        self._session_id = session_id

    async def approve(self, request: ApprovalRequest) -> Decision:
        note = permission_note(self._session_id, request)
        decision: Decision = await self._questions.ask(
            self._session_id, note, "permission.requested"
        )
        return decision

    async def ask(self, question: Question) -> str | None:
        note = question_note(self._session_id, question)
        answer: str | None = await self._questions.ask(self._session_id, note, "question.asked")
        return answer


def permission_note(session_id: str, request: ApprovalRequest) -> c.PermissionRequested:
    preview = request.preview
    return c.PermissionRequested(
        request_id=request.request_id,
        session_id=session_id,
        call_id=request.call_id,
        title=request.title,
        kind=request.kind,
        raw_input=request.raw_input,
        offered=list(request.offered),
        preview_diff=c.DiffPreview(
            path=str(preview.path), old_text=preview.old_text, new_text=preview.new_text
        )
        if isinstance(preview, FileDiff)
        else None,
        preview_text=preview if isinstance(preview, str) else None,
    )


def question_note(session_id: str, question: Question) -> c.QuestionAsked:
    return c.QuestionAsked(
        request_id=question.request_id,
        session_id=session_id,
        text=question.text,
        choices=list(question.choices),
    )


def _announcement(session_id: str, asking: Asking) -> tuple[str, c.Wire]:
    if asking.approval is not None:
        return "permission.requested", permission_note(session_id, asking.approval)
    question = asking.question or Question(text="")
    return "question.asked", question_note(session_id, question)
