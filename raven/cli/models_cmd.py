"""`raven models`: the models Raven can use, which is the default and why."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

import typer

from raven.cli.options import ConfigOption

if TYPE_CHECKING:
    from raven.config import ModelSpec, RavenConfig

VENDOR_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
VENDOR_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}


def models_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    config: ConfigOption = None,
) -> None:
    """List the models: provider, base URL, key variable and whether it is set, the default."""
    import json

    from raven.cli.options import load

    cfg, _ = load(config, "cli")
    rows = model_rows(cfg, os.environ)
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("", "model", "provider", "base URL", "key", box=None)
    for row in rows:
        key = row["keyEnv"] or ("in config" if row["keyInConfig"] else "-")
        if row["keyEnv"]:
            key += " (set)" if row["keySet"] else " (not set)"
        mark = "●" if row["default"] else ""
        table.add_row(mark, row["id"], row["provider"], row["baseUrl"] or "-", key)
    console = Console(highlight=False)
    console.print(table)
    default = next((r for r in rows if r["default"]), None)
    console.print(
        f"[dim]default: {default['id']} ({default['why']})[/]"
        if default
        else "[dim]no default: configure a model, set OPENAI_API_KEY or ANTHROPIC_API_KEY, "
        "or use --model echo[/]"
    )


def model_rows(cfg: RavenConfig, env: Mapping[str, str]) -> list[dict[str, Any]]:
    """Each usable model, configured or implicit, with why the default is the default."""
    from raven.config import ConfigError
    from raven.providers import pick_model

    try:
        default: ModelSpec | None = pick_model(cfg, None, env)
    except ConfigError:
        default = None
    why = (
        "defaultModel in the config"
        if cfg.default_model
        else "the first configured model"
        if cfg.models
        else "OPENAI_API_KEY is set"
        if env.get("OPENAI_API_KEY")
        else "ANTHROPIC_API_KEY is set"
    )
    specs = cfg.selectable_models()
    if default is not None and all(m.id != default.id for m in specs):
        specs.insert(len(cfg.models), default)  # implicit, from the environment
    return [_row(m, default, why, env) for m in specs]


def _row(
    spec: ModelSpec, default: ModelSpec | None, why: str, env: Mapping[str, str]
) -> dict[str, Any]:
    key_env = None
    if spec.provider in VENDOR_KEYS and not spec.api_key:
        key_env = spec.api_key_env or (None if spec.base_url else VENDOR_KEYS[spec.provider])
    is_default = default is not None and spec.id == default.id
    return {
        "id": spec.id,
        "name": spec.display_name,
        "provider": spec.provider,
        "model": spec.vendor_model,
        "baseUrl": spec.base_url or VENDOR_URLS.get(spec.provider),
        "keyEnv": key_env,
        "keySet": bool(key_env and env.get(key_env)),
        "keyInConfig": bool(spec.api_key),
        "default": is_default,
        "why": why if is_default else None,
    }
