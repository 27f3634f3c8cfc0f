"""A turn's askings are the engine's: logged while they wait, answerable by any face (and,
shared, any replica), the first answer winning and the face's own asking withdrawn."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from raven.engine import (
    Answered,
    ApprovalRequest,
    Asking,
    Decision,
    Logged,
    Question,
    Runtime,
    ToolCallUpdated,
    run_turn,
    start_turn,
)
from tests.engine.conftest import Events, MakeRuntime
from tests.engine.test_turn import prompt

DEADLINE_S = 10


class SilentAsker:
    """A face whose person never answers; records what was withdrawn."""

    def __init__(self) -> None:
        self.withdrawn: list[str] = []

    async def approve(self, request: ApprovalRequest) -> Decision:
        try:
            await asyncio.Event().wait()  # the person is away; the engine bounds the wait
        finally:
            self.withdrawn.append(request.request_id)
        raise AssertionError("unreachable")

    async def ask(self, question: Question) -> str | None:
        try:
            await asyncio.Event().wait()
        finally:
            self.withdrawn.append(question.request_id)
        raise AssertionError("unreachable")


def answering(runtime: Runtime, session_id: str, value: object) -> Callable[[Logged], None]:
    """A follower of the session that answers every asking it hears with `value`, as a
    face elsewhere would."""

    answers: set[asyncio.Task[bool]] = set()

    def heard(entry: Logged) -> None:
        if isinstance(entry.event, Asking):
            request_id = entry.event.request_id
            task = asyncio.ensure_future(runtime.answer(session_id, request_id, value))
            answers.add(task)
            task.add_done_callback(answers.discard)

    return heard


async def test_an_approval_answered_elsewhere_wins_and_the_face_withdraws_its_own(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    write = {"name": "write_file", "arguments": {"path": "notes.txt", "content": "hi"}}
    runtime = make_runtime([{"toolCalls": [write]}, {"text": "written"}])
    session = await runtime.new_session(tmp_path)
    logged: list[Logged] = []
    session.follow(logged.append)
    session.follow(answering(runtime, session.id, "allow_once"))
    face = SilentAsker()
    events = Events()
    async with asyncio.timeout(DEADLINE_S):
        assert await run_turn(session, prompt("write it"), face, events.append) == "end_turn"
    assert (tmp_path / "notes.txt").read_text() == "hi"
    (asking,) = [e.event for e in logged if isinstance(e.event, Asking)]
    assert asking.approval is not None and asking.approval.title.startswith("Write")
    answered = [e for e in logged if isinstance(e.event, Answered)]
    assert [a.event.request_id for a in answered] == [asking.request_id]
    assert face.withdrawn == [asking.request_id]
    assert events.of(ToolCallUpdated)[-1].status == "completed"


async def test_a_question_answered_elsewhere_reaches_the_tool(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    ask = {"name": "ask_user", "arguments": {"question": "Which branch?"}}
    runtime = make_runtime([{"toolCalls": [ask]}, {"text": "deploying"}])
    session = await runtime.new_session(tmp_path)
    session.follow(answering(runtime, session.id, "main"))
    async with asyncio.timeout(DEADLINE_S):
        await run_turn(session, prompt("deploy"), SilentAsker(), lambda e: None)
    result = session.window[-2]
    assert result.role == "tool" and result.content == "main"  # type: ignore[union-attr]


async def test_an_answer_for_no_asking_is_refused(
    make_runtime: MakeRuntime, tmp_path: Path
) -> None:
    runtime = make_runtime()
    session = await runtime.new_session(tmp_path)
    assert not await runtime.answer(session.id, "no-such-request", "allow_once")
    turn = start_turn(session, prompt("hello"), SilentAsker(), lambda e: None)
    assert await turn == "end_turn"
    assert not await runtime.answer(session.id, "no-such-request", "allow_once")
