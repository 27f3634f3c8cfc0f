"""What the sessions' turns wait on, shown to this gateway's UIs: approvals and questions.

Every asking is read from the log of a session the gateway follows (`Asking`, then
`Answered`), whichever process and face runs the turn, announced to every UI once, and
settled once. A UI's answer goes to the turn through the engine (`Runtime.answer`), the one
registry of askings: the first answer from any face wins. Never runs a turn; sends nothing
but through `broadcast`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from raven.engine import (
    Answer,
    Answered,
    ApprovalRequest,
    Asking,
    FileDiff,
    LiveSession,
    Logged,
    Question,
    Runtime,
    until_answered,
)
from raven.jsonrpc import RpcError
from raven.rpc import contract as c

Broadcast = Callable[[str, c.Wire], None]


class Questions:
    def __init__(self, runtime: Runtime, broadcast: Broadcast) -> None:
        self._runtime = runtime
        self._broadcast = broadcast
        self._shown: dict[str, tuple[str, dict[str, Any]]] = {}
        """request id → (session id, the announcement) of an asking not yet answered."""

    async def settle(self, request_id: str, value: Answer) -> None:
        """A UI's answer, for the turn that asked, wherever it runs."""
        shown = self._shown.get(request_id)
        if shown is None or not await self._runtime.answer(shown[0], request_id, value):
            raise RpcError(c.Code.REQUEST_NOT_FOUND, f"No pending request {request_id}")

    def waiting(self, session_id: str) -> list[dict[str, Any]]:
        """The announcements of what the session's turn still waits for."""
        return [note for sid, note in self._shown.values() if sid == session_id]

    def heard(self, live: LiveSession, entry: Logged) -> None:
        """An event of a session the gateway follows: an asking begins or ends."""
        event = entry.event
        if isinstance(event, Asking) and event.request_id not in self._shown:
            method, note = _announcement(live.id, event)
            announced = {"method": method, **note.model_dump(mode="json", by_alias=True)}
            self._shown[event.request_id] = (live.id, announced)
            self._broadcast(method, note)
        elif isinstance(event, Answered) and self._shown.pop(event.request_id, None) is not None:
            self._broadcast("request.settled", c.RequestSettled(request_id=event.request_id))

    def known(self, live: LiveSession, logged: list[Logged]) -> None:
        """What a session's log holds when the gateway begins following it: its askings not
        yet answered are announced."""
        answered = {e.event.request_id for e in logged if isinstance(e.event, Answered)}
        for entry in logged:
            if isinstance(entry.event, Asking) and entry.event.request_id not in answered:
                self.heard(live, entry)

    def forget(self, session_id: str) -> None:
        """The gateway no longer follows the session: its askings are no longer shown here
        (the turn may still be answered elsewhere)."""
        for request_id, (sid, _) in list(self._shown.items()):
            if sid == session_id:
                del self._shown[request_id]
                self._broadcast("request.settled", c.RequestSettled(request_id=request_id))


class HubAsker:
    """A turn's approvals and questions, for the UIs here: the gateway follows the session
    while the turn waits (`attend`), so its UIs see the asking from the log and answer it
    through the engine. Asks no one itself, so it never answers: the engine's answer, or
    its deadline, ends the wait."""

    def __init__(self, attend: Callable[[str], Callable[[], None]], session_id: str) -> None:
        self._attend = attend
        self._session_id = session_id

    async def approve(self, request: ApprovalRequest) -> NoReturn:
        await self._shown()

    async def ask(self, question: Question) -> NoReturn:
        await self._shown()

    async def _shown(self) -> NoReturn:
        stop = self._attend(self._session_id)
        try:
            await until_answered()
        finally:
            stop()


def _permission_note(session_id: str, request: ApprovalRequest) -> c.PermissionRequested:
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


def _question_note(session_id: str, question: Question) -> c.QuestionAsked:
    return c.QuestionAsked(
        request_id=question.request_id,
        session_id=session_id,
        text=question.text,
        choices=list(question.choices),
    )


def _announcement(session_id: str, asking: Asking) -> tuple[str, c.Wire]:
    if asking.approval is not None:
        return "permission.requested", _permission_note(session_id, asking.approval)
    question = asking.question or Question(text="")
    return "question.asked", _question_note(session_id, question)
