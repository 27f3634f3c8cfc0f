"""Choosing the model for a turn and building its provider. Imports vendor code lazily."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from raven.config import ECHO_MODEL_ID, ConfigError, ModelSpec, RavenConfig
from raven.providers.base import Provider

DEFAULT_OPENAI_MODEL = "gpt-4.1-mini"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-4-5"


class NoModelConfigured(ConfigError):
    """No model was named, none is configured, and no provider key is in the environment."""

    def __init__(self, config_file: Path | None = None) -> None:
        where = f"the config file {config_file}" if config_file else "the config file"
        super().__init__(
            f"no model is configured. Run `raven setup` to pick one, add one to {where} "
            "(`raven config init` writes a starter; `raven config example` shows every key), "
            "or set OPENAI_API_KEY or ANTHROPIC_API_KEY; for a smoke test, use the offline "
            "model: `--model echo`."
        )


def pick_model(
    config: RavenConfig,
    requested: str | None,
    env: Mapping[str, str] = os.environ,
    config_file: Path | None = None,
) -> ModelSpec:
    """The model a new session uses: the requested id, the default, or one from the env.

    Raises `NoModelConfigured` (naming `config_file`) or `ConfigError` for an unknown id.
    """
    model_id = requested or config.default_model
    if model_id:
        spec = config.find_model(model_id)
        if spec is None:
            known = ", ".join([m.id for m in config.models] + [ECHO_MODEL_ID])
            raise ConfigError(f"unknown model {model_id!r}; configured: {known}")
        return spec
    if config.models:
        return config.models[0]
    if env.get("OPENAI_API_KEY"):
        return ModelSpec(id=DEFAULT_OPENAI_MODEL, provider="openai")
    if env.get("ANTHROPIC_API_KEY"):
        return ModelSpec(id=DEFAULT_ANTHROPIC_MODEL, provider="anthropic")
    raise NoModelConfigured(config_file)


def create_provider(spec: ModelSpec, config: RavenConfig, config_dir: Path) -> Provider:
    """Build the adapter for `spec`; a script path is resolved against the config directory."""
    read_timeout_s = config.limits.model_timeout_s
    if spec.provider == "scripted":
        from raven.providers.scripted import ScriptedProvider, load_script

        script = load_script(config_dir / Path(spec.script).expanduser()) if spec.script else None
        return ScriptedProvider(spec, script)
    if spec.provider == "openai":
        from raven.providers.openai import OpenAIProvider

        return OpenAIProvider(spec, read_timeout_s)
    from raven.providers.anthropic import AnthropicProvider

    return AnthropicProvider(spec, read_timeout_s)
