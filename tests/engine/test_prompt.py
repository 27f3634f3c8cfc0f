from __future__ import annotations

import platform
from datetime import date
from pathlib import Path

from raven.config import Paths, RavenConfig
from raven.engine import Runtime
from raven.engine.prompt import DEFAULT_PROMPT, system_prompt
from raven.messages import user_text
from raven.providers import ModelRequest, estimate_tokens

DEFAULT_PROMPT_MAX_TOKENS = 90


def test_the_default_prompt_names_cwd_date_and_platform() -> None:
    text = system_prompt(Path("/work/project"), date(2026, 11, 29))
    assert "/work/project" in text and "2026-11-29" in text
    assert platform.system() in text and "{" not in text


def test_the_default_prompt_stays_short() -> None:
    """Every token is paid on each cold turn: 361 made a small CPU model wait 1.6 s."""
    text = system_prompt(Path("/home/someone/projects/a-typical-project"), date(2026, 11, 29))
    tokens = estimate_tokens(ModelRequest(system=text, messages=[], tools=[]))
    assert tokens <= DEFAULT_PROMPT_MAX_TOKENS, tokens
    assert len(DEFAULT_PROMPT.split()) < 60


def test_a_custom_prompt_keeps_other_braces() -> None:
    text = system_prompt(Path("/p"), date(2026, 1, 2), 'In {cwd} on {date}: reply {"ok": 1}')
    assert text == 'In /p on 2026-01-02: reply {"ok": 1}'


async def test_mode_then_model_prompt_replace_the_default(tmp_path: Path) -> None:
    (tmp_path / "terse.md").write_text("Be terse in {cwd}.")
    config = RavenConfig.model_validate(
        {
            "models": [
                {"id": "a", "provider": "scripted", "systemPrompt": {"file": "terse.md"}},
                {"id": "b", "provider": "scripted"},
            ],
            "modes": [
                {"id": "plain", "name": "Plain"},
                {"id": "pirate", "name": "Pirate", "systemPrompt": "Talk like a pirate."},
            ],
            "defaultModel": "a",
            "defaultMode": "plain",
        }
    )
    runtime = Runtime(config, Paths(tmp_path / "config.json", tmp_path / "data"), face="test")
    try:
        live = await runtime.new_session(tmp_path)
        assert live.instructions == "Be terse in {cwd}."
        await runtime.set_mode(live, "pirate")
        assert live.instructions == "Talk like a pirate."
        await runtime.set_mode(live, "plain")
        await runtime.set_model(live, "b")
        assert live.instructions is None
    finally:
        await runtime.aclose()


def test_estimates_count_history_and_answer() -> None:
    request = ModelRequest(system="s" * 40, messages=[user_text("x" * 400)], tools=[])
    assert estimate_tokens(request, "y" * 400) >= (40 + 400 + 400) // 4
