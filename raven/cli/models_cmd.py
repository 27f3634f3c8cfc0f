"""`raven models`: the models Raven can use, which is the default and why; `add`,
`default` and `remove` change them in the config file (0600) without editing JSON.
Never writes an API key: a model names the environment variable that holds one."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from raven.cli.help import Typer
from raven.cli.options import ConfigOption

if TYPE_CHECKING:
    from raven.config import ModelSpec, RavenConfig

VENDOR_KEYS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
VENDOR_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}

app = Typer(help="List the models; add, remove or make one the default.")


@app.callback(invoke_without_command=True)
def models_command(
    ctx: typer.Context,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    config: ConfigOption = None,
) -> None:
    """List the models: provider, base URL, key variable and whether it is set, the default."""
    if ctx.invoked_subcommand is not None:
        return
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
    console = Console(markup=False, highlight=False)  # ids and URLs are text
    console.print(table)
    default = next((r for r in rows if r["default"]), None)
    console.print(
        f"default: {default['id']} ({default['why']})"
        if default
        else "no default: configure a model, set OPENAI_API_KEY or ANTHROPIC_API_KEY, "
        "or use --model echo",
        style="dim",
    )


@app.command("add")
def add_command(
    name: Annotated[str, typer.Argument(help="The id to use it by (`raven run -m NAME`).")],
    model: Annotated[str, typer.Option("--model", help="The server's model id.")],
    provider: Annotated[
        str, typer.Option("--provider", help="openai (any OpenAI-compatible server) or anthropic.")
    ] = "openai",
    base_url: Annotated[
        str | None,
        typer.Option("--base-url", help="The server's base URL, e.g. http://127.0.0.1:11434/v1."),
    ] = None,
    key_env: Annotated[
        str | None,
        typer.Option("--key-env", help="The environment variable holding its API key."),
    ] = None,
    make_default: Annotated[
        bool, typer.Option("--default", help="Make it the default model.")
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Add a model to the config (the default too when there is none yet, or with
    --default)."""
    from raven.config import ConfigError, ModelSpec

    if provider not in VENDOR_KEYS:
        raise ConfigError(f"--provider {provider!r}: use openai or anthropic")
    with _editing(config) as (cfg, path):
        if any(m.id == name for m in cfg.models):
            raise ConfigError(
                f"there is a model {name!r} already; `raven models remove {name}` first"
            )
        spec = ModelSpec.model_validate(
            {"id": name, "provider": provider, "model": model, "baseUrl": base_url}
            | ({"apiKeyEnv": key_env} if key_env else {})
        )
        default = cfg.default_model if cfg.default_model and not make_default else name
        models = [*cfg.models, spec]
        _save(cfg.model_copy(update={"models": models, "default_model": default}), path)
    shown = " (the default)" if default == name else ""
    typer.echo(f"added {name}{shown} to {path}")


@app.command("default")
def default_command(
    name: Annotated[str, typer.Argument(help="A model id from `raven models`.")],
    config: ConfigOption = None,
) -> None:
    """Make a model the default."""
    with _editing(config) as (cfg, path):
        _known(cfg, name)
        _save(cfg.model_copy(update={"default_model": name}), path)
    typer.echo(f"{name} is the default model ({path})")


@app.command("remove")
def remove_command(
    name: Annotated[str, typer.Argument(help="A model id from `raven models`.")],
    config: ConfigOption = None,
) -> None:
    """Remove a model from the config (if it was the default, the config then has none)."""
    from raven.config import ConfigError

    with _editing(config) as (cfg, path):
        if all(m.id != name for m in cfg.models):
            _known(cfg, name)
            raise ConfigError(
                f"{name!r} is built in, not in the config: there is nothing to remove"
            )
        default = None if cfg.default_model == name else cfg.default_model
        kept = [m for m in cfg.models if m.id != name]
        _save(cfg.model_copy(update={"models": kept, "default_model": default}), path)
    note = "; there is no default model now" if cfg.default_model == name else ""
    typer.echo(f"removed {name} from {path}{note}")


@contextmanager
def _editing(config: str | None) -> Iterator[tuple[RavenConfig, Path]]:
    """The config file's settings (none yet: an empty config) and its path, read and
    written back while no other Raven edits it."""
    from raven.cli.options import load
    from raven.config import resolve_paths
    from raven.config.store import config_lock

    with config_lock(resolve_paths(config).config_file):
        cfg, paths = load(config, "cli", creates=True)
        yield cfg, paths.config_file


def _known(cfg: RavenConfig, name: str) -> None:
    from raven.config import ConfigError

    if cfg.find_model(name) is None:
        known = ", ".join(m.id for m in cfg.selectable_models())
        raise ConfigError(f"no model {name!r}; the models are: {known}")


def _save(cfg: RavenConfig, path: Path) -> None:
    from raven.config import RavenConfig, save_config

    save_config(RavenConfig.model_validate(cfg.model_dump()), path)  # validated again


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
