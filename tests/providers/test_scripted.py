from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from raven.config import ConfigError, ModelSpec
from raven.messages import user_text
from raven.providers import (
    Finish,
    ModelRequest,
    ProviderError,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
)
from raven.providers.scripted import ScriptedProvider, load_script


async def run(p: ScriptedProvider, text: str) -> list[object]:
    return [e async for e in p.stream(ModelRequest(system="", messages=[user_text(text)]))]


async def test_echo_streams_the_last_user_text_word_by_word() -> None:
    events = await run(
        ScriptedProvider(ModelSpec(id="echo", provider="scripted"), None), "hello there world"
    )
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == ["hello ", "there ", "world"]
    assert events[-1] == Finish("end_turn")


async def test_script_steps_play_in_order_then_echo(tmp_path: Path) -> None:
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps(
            [
                {
                    "thought": "plan",
                    "text": "first",
                    "toolCalls": [{"name": "list_dir", "arguments": {"path": "."}}],
                },
                {"text": "second", "stop": "max_tokens"},
            ]
        )
    )
    spec = ModelSpec(id="s", provider="scripted", script=str(path))
    a = ScriptedProvider(spec, load_script(path))
    b = ScriptedProvider(spec, load_script(path))  # another session of the same process
    first = await run(a, "x")
    assert ThoughtDelta("plan") in first
    (call,) = [e.call for e in first if isinstance(e, ToolCallReady)]
    assert (call.name, call.arguments) == ("list_dir", {"path": "."})
    assert first[-1] == Finish("tool_use")
    second = await run(b, "y")
    assert [e.text for e in second if isinstance(e, TextDelta)] == ["second"]
    assert second[-1] == Finish("max_tokens")
    third = await run(a, "echo me")
    assert [e.text for e in third if isinstance(e, TextDelta)] == ["echo ", "me"]


async def test_a_step_waits_for_its_gate_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "gated.json"
    path.write_text(json.dumps([{"text": "opened", "waitFor": "gate"}, {"waitFor": "never"}]))
    spec = ModelSpec(id="s", provider="scripted", script=str(path))
    provider = ScriptedProvider(spec, load_script(path))
    answer = asyncio.create_task(run(provider, "x"))
    await asyncio.wait([answer], timeout=0.2)
    assert not answer.done()  # held while the gate is shut
    (tmp_path / "gate").touch()
    events = await asyncio.wait_for(answer, 10)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["opened"]
    monkeypatch.setattr("raven.providers.scripted.GATE_DEADLINE_S", 0.05)
    with pytest.raises(ProviderError, match="never appeared"):
        await run(provider, "y")


@pytest.mark.parametrize(
    "body, message",
    [
        ("{}", "top level must be a list"),
        ('[{"bogus": 1}]', "Extra inputs"),
        ("[1,", "invalid JSON at line 1"),
    ],
)
def test_bad_scripts_are_config_errors(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / f"bad{abs(hash(body))}.json"
    path.write_text(body)
    with pytest.raises(ConfigError, match=message):
        load_script(path)
