"""How a face answers the engine: the Asker protocol and what it is asked."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn, Protocol

from raven.tools import ALL_DECISIONS, Decision, Permission, Preview, Question, ToolKind


@dataclass(frozen=True)
class ApprovalRequest:
    call_id: str
    tool: str
    """What an "always" answer is remembered under: the tool's name, or a tool's own key."""
    title: str
    kind: ToolKind
    raw_input: dict[str, Any]
    locations: list[Path] = field(default_factory=list)
    offered: tuple[Decision, ...] = ALL_DECISIONS
    """The choices the face may offer; the answer is one of them."""
    preview: Preview | None = None
    """What the call will do (the change to a file, the command and where it runs), to show
    beside the question."""
    person: bool = False
    """Only a person may allow it (a sub-agent's escalated request): no `auto` policy
    answers for them; `deny` still refuses."""
    request_id: str = ""
    """Names this asking in the session's log (the engine sets it), for any face that
    answers it from elsewhere."""


def approval_of(call_id: str, permission: Permission) -> ApprovalRequest:
    """What a tool's own approval request (a sub-agent's, say) asks the face, for `call_id`."""
    return ApprovalRequest(
        call_id,
        permission.key,
        permission.title,
        permission.kind,
        permission.raw_input,
        offered=permission.offered,
        preview=permission.preview,
        person=permission.person,
    )


Unanswered = Literal["refused", "unanswered", "cancelled"]
"""An approval no person gave: a policy refused it without asking (`refused`), no one
could be asked or no answer came (`unanswered`), or the asking was withdrawn
(`cancelled`). The model is told which, so it can act on it."""

Answer = Decision | Unanswered | str | None
"""What any face answers a turn's asking with, through `Runtime.answer`: an approval's
decision (or why there is none), or a question's text (None: no answer)."""


class Asker(Protocol):
    """Obtains approvals and answers from a person (or a policy) on a face's behalf.

    Either method may take as long as the person needs; the engine bounds the
    wait. An asker that cannot ask says why (`Unanswered`), or answers None to a
    question.
    """

    async def approve(self, request: ApprovalRequest) -> Decision | Unanswered: ...

    async def ask(self, question: Question) -> str | None: ...


async def until_answered() -> NoReturn:
    """Wait, for an asking a face does not answer itself: the answer comes through the
    engine (`Runtime.answer`, from whoever follows the session's log), which then ends
    the wait, as does the turn's deadline or its end."""
    await asyncio.get_running_loop().create_future()
    raise AssertionError("an asking ends when the engine stops it")


class AnsweredElsewhere:
    """The asker of a face whose people answer from the session's log (each editor, or
    UI, following it): asks no one itself, so it never answers (`until_answered`)."""

    async def approve(self, request: ApprovalRequest) -> NoReturn:
        await until_answered()

    async def ask(self, question: Question) -> NoReturn:
        await until_answered()
