"""`raven config path | show | init`."""

from __future__ import annotations

import typer

from raven.cli.help import Typer
from raven.cli.options import ConfigOption

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
def show_command(config: ConfigOption = None) -> None:
    """Print the config in force, with secrets masked."""
    import json

    from raven.cli.options import load
    from raven.config import masked
    from raven.config.store import config_to_json, file_mode

    cfg, paths = load(config, "cli")
    if paths.config_file.exists():
        mode = file_mode(paths.config_file)
        typer.echo(f"# {paths.config_file} (mode {mode:04o})", err=True)
    else:
        typer.echo(f"# {paths.config_file} (no file: the empty config)", err=True)
    typer.echo(json.dumps(masked(config_to_json(cfg)), indent=2))


@app.command("init")
def init_command(config: ConfigOption = None) -> None:
    """Write a starter config file, or add the starter keys an existing one lacks.

    Keys already set are never changed.
    """
    from raven.config import load_config, resolve_paths, save_config, starter_config
    from raven.config.store import add_missing_keys

    paths = resolve_paths(config)
    if not paths.config_file.exists():
        save_config(starter_config(), paths.config_file)
        typer.echo(f"wrote {paths.config_file}")
        return
    merged, added = add_missing_keys(load_config(paths.config_file), starter_config())
    if not added:
        typer.echo(f"{paths.config_file} already has every starter key; nothing changed")
        return
    save_config(merged, paths.config_file)
    typer.echo(f"added {', '.join(added)} to {paths.config_file} (other keys kept)")
