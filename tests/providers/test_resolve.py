from __future__ import annotations

import pytest

from raven.config import ConfigError, RavenConfig
from raven.providers import NoModelConfigured, pick_model


def test_a_key_in_the_environment_picks_that_providers_default_model() -> None:
    empty = RavenConfig()
    openai = pick_model(empty, None, {"OPENAI_API_KEY": "sk-x"})
    assert (openai.provider, openai.id) == ("openai", "gpt-4.1-mini")
    claude = pick_model(empty, None, {"ANTHROPIC_API_KEY": "k"})
    assert (claude.provider, claude.id) == ("anthropic", "claude-sonnet-4-5")


def test_no_model_and_no_key_says_how_to_configure_one() -> None:
    with pytest.raises(NoModelConfigured, match="--model echo"):
        pick_model(RavenConfig(), None, {})


def test_echo_always_exists_and_unknown_ids_are_named() -> None:
    assert pick_model(RavenConfig(), "echo", {}).provider == "scripted"
    with pytest.raises(ConfigError, match="unknown model 'gpt-9'"):
        pick_model(RavenConfig(), "gpt-9", {})
