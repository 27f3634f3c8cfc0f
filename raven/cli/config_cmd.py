"""`raven config path | show | init | example | sandbox`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from raven.cli.help import Typer
from raven.cli.options import ConfigOption

if TYPE_CHECKING:
    from pathlib import Path

    from raven.config import RavenConfig

app = Typer(help="Show and create the config file.", no_args_is_help=True)


@app.command("path")
def path_command(config: ConfigOption = None) -> None:
    """Print where the config file, data and logs live."""
    from raven.config import resolve_paths

    paths = resolve_paths(config)
    typer.echo(f"config: {paths.config_file}")
    typer.echo(f"data:   {paths.data_dir}")
    typer.echo(f"logs:   {paths.logs_dir}")


@app.command("show")
def show_command(
    effective: Annotated[
        bool,
        typer.Option(
            "--effective", help="Every key with its default, and the model in force, too."
        ),
    ] = False,
    config: ConfigOption = None,
) -> None:
    """Print the config file's settings, with secrets masked."""
    import json

    from raven.cli.options import load
    from raven.config import masked
    from raven.config.store import config_to_json, file_mode

    cfg, paths = load(config, "cli")
    if effective:
        typer.echo(json.dumps(masked(_effective(cfg)), indent=2))
        return
    if paths.config_file.exists():
        mode = file_mode(paths.config_file)
        typer.echo(f"# {paths.config_file} (mode {mode:04o})", err=True)
    else:
        typer.echo(f"# {paths.config_file} (no file: the empty config)", err=True)
    typer.echo(json.dumps(masked(config_to_json(cfg)), indent=2))


@app.command("sandbox")
def sandbox_command(config: ConfigOption = None) -> None:
    """Print what the sandbox of commands is, and what this machine's kernel enforces."""
    from raven.cli.options import load
    from raven.sandbox import enforcement, kernel_version

    cfg, _ = load(config, "cli")
    typer.echo(f"sandbox:  {enforcement(cfg.sandbox)}")
    if cfg.sandbox_allow_hosts:
        typer.echo(f"allowed:  {', '.join(cfg.sandbox_allow_hosts)} (TCP, by port)")
    for mode in cfg.modes:
        if mode.sandbox is not None:
            refused = " (its commands are refused)" if kernel_version() < 1 else ""
            typer.echo(f"mode {mode.id}: requires {enforcement(mode.sandbox)}{refused}")


@app.command("example")
def example_command() -> None:
    """Print an example config that shows every key (ships with Raven)."""
    from raven.config import EXAMPLE_FILE

    typer.echo(EXAMPLE_FILE.read_text(encoding="utf-8"), nl=False)


@app.command("init")
def init_command(config: ConfigOption = None) -> None:
    """Write a starter config file, or add the starter keys an existing one lacks.

    Keys already set are never changed.
    """
    from raven.config import resolve_paths
    from raven.config.store import config_lock

    paths = resolve_paths(config)
    with config_lock(paths.config_file):
        _init(paths.config_file)


def _init(path: Path) -> None:
    from raven.config import load_config, save_config, starter_config
    from raven.config.store import NO_MODEL_HINT, add_missing_keys

    if not path.exists():
        written = starter_config()
        save_config(written, path)
        typer.echo(f"wrote {path}")
        if written.default_model:
            typer.echo(f"default model: {written.default_model} (its API key is set)")
        else:
            typer.echo(f"raven: {NO_MODEL_HINT}", err=True)
        return
    merged, added = add_missing_keys(load_config(path), starter_config())
    if not added:
        typer.echo(f"{path} already has every starter key; nothing changed")
        return
    save_config(merged, path)
    typer.echo(f"added {', '.join(added)} to {path} (other keys kept)")


def _effective(cfg: RavenConfig) -> dict[str, Any]:
    """The config with defaults filled in and `defaultModel` naming the model in force."""
    from raven.config import ConfigError
    from raven.providers import pick_model

    data = cfg.model_dump(mode="json", by_alias=True)
    try:
        model = pick_model(cfg, None)
    except ConfigError:
        return data
    if model.id not in [m.id for m in cfg.models]:
        data["models"].append(model.model_dump(mode="json", by_alias=True, exclude_none=True))
    data["defaultModel"] = model.id
    return data
