from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from raven.a2a.turn import Asked, Ended, MintedContexts, Progress, TaskTurn, reply_value
from raven.config import Paths, RavenConfig
from raven.engine import Asking, Runtime
from raven.messages import ToolResultMessage


def test_minted_contexts_are_recognised_once_and_others_never() -> None:
    minted = MintedContexts()
    context_id = minted.generate()
    assert minted.take(context_id) is True
    assert minted.take(context_id) is False
    assert minted.take("a-client-chose-this") is False


def test_minted_contexts_forget_the_oldest_beyond_the_limit() -> None:
    minted = MintedContexts()
    first = minted.generate()
    for _ in range(MintedContexts.MAX_REMEMBERED):
        minted.generate()
    assert minted.take(first) is False


@pytest.mark.parametrize("answerer", ["the peer", "a person at Raven"])
async def test_the_peers_answer_and_anyones_go_to_the_engines_one_registry(
    tmp_path: Path, answerer: str
) -> None:
    """The peer's answer reaches the turn as any face's does (`LiveSession.answer`); an
    answer given through the runtime by someone else ends the peer's question too, and the
    task says who answered."""
    script = tmp_path / "script.json"
    steps = [
        {"toolCalls": [{"name": "ask_user", "arguments": {"question": "Colour?"}}]},
        {"text": "Blue it is."},
    ]
    script.write_text(json.dumps(steps))
    models = [{"id": "s", "provider": "scripted", "script": str(script)}]
    config = RavenConfig.model_validate({"models": models, "defaultModel": "s"})
    paths = Paths(config_file=tmp_path / "config.json", data_dir=tmp_path / "data")
    runtime = Runtime(config, paths, face="a2a")
    try:
        session = await runtime.new_session(tmp_path)
        logged: list[object] = []
        stop = session.follow(lambda entry: logged.append(entry.event))
        turn = TaskTurn(session, None)
        turn.start("paint it", "ask", 5.0)
        async with asyncio.timeout(10):
            while not isinstance(asked := await turn.next(), Asked):
                pass  # progress: the ask_user call began
            assert "Colour?" in asked.text and turn.asking
            (asking,) = [e for e in logged if isinstance(e, Asking)]
            if answerer == "the peer":
                assert turn.answer("blue")
            else:
                assert await runtime.answer(session.id, asking.request_id, "blue")
            assert await turn.wait_answer(10) and not turn.asking
            assert not turn.answer("red")  # settled: a second answer is no answer
            while not isinstance(end := await turn.next(), Ended):
                pass  # progress: the ask_user call ended
        assert end.text == "Blue it is."
        assert turn.answered_elsewhere is (answerer != "the peer")
        results = [m.content for m in session.window if isinstance(m, ToolResultMessage)]
        assert "blue" in results[0]
        stop()
    finally:
        await runtime.aclose()


def test_a_peers_reply_is_taken_in_the_engines_vocabulary() -> None:
    """What a peer writes back reaches the engine as the asking wants it, wherever it
    arrives: a question's text as it is, an approval's as a decision."""
    assert reply_value("the blue one", approval=False) == "the blue one"
    assert reply_value(None, approval=False) is None
    assert reply_value("Yes.", approval=True) == "allow_once"
    assert reply_value("always", approval=True) == "allow_always"
    assert reply_value("no way", approval=True) == "reject_once"
    assert reply_value(None, approval=True) == "unanswered"


async def test_a_peer_is_told_when_its_conversation_was_compacted(tmp_path: Path) -> None:
    """A task's turn that compacts its conversation first says so to the peer, as a
    status line, before its answer."""
    script = tmp_path / "script.json"
    steps = [{"text": "First."}, {"text": "They sent two long notes."}, {"text": "Second."}]
    script.write_text(json.dumps(steps))
    model = {"id": "s", "provider": "scripted", "script": str(script), "contextWindow": 20_000}
    config = RavenConfig.model_validate({"models": [model], "defaultModel": "s"})
    paths = Paths(config_file=tmp_path / "config.json", data_dir=tmp_path / "data")
    runtime = Runtime(config, paths, face="a2a")
    try:
        session = await runtime.new_session(tmp_path)
        said: list[object] = []
        for prompt in ("plums " * 6_700, "more plums " * 2_800):
            turn = TaskTurn(session, None)
            turn.start(prompt, "auto", 5.0)
            async with asyncio.timeout(10):
                while not isinstance(step := await turn.next(), Ended):
                    said.append(step)
            said.append(step)
    finally:
        await runtime.aclose()
    lines = [s.text for s in said if isinstance(s, Progress)]
    assert lines == ["Compacted: the model now sees a summary of the earlier conversation."]
    ends = [s for s in said if isinstance(s, Ended)]
    assert [e.text for e in ends] == ["First.", "Second."]
