"""Options shared by every command, and loading what a command needs from them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from raven.config import Paths, RavenConfig


def _complete(name: str) -> Any:
    """A completion callback that imports `raven.cli.complete` only when the shell asks."""

    def complete(incomplete: str) -> list[str]:
        from raven.cli import complete as candidates

        return getattr(candidates, name)(incomplete)  # type: ignore[no-any-return]

    return complete


ModelOption = Annotated[
    str | None,
    typer.Option("--model", "-m", help="Model id.", autocompletion=_complete("model_ids")),
]
ModeOption = Annotated[
    str | None, typer.Option("--mode", help="Mode id.", autocompletion=_complete("mode_ids"))
]
SystemOption = Annotated[
    str | None,
    typer.Option(
        "--system",
        help="The system prompt for this run, instead of the mode's or model's "
        "({cwd}, {date} and {platform} are filled in).",
    ),
]
ProjectOption = Annotated[
    bool,
    typer.Option(
        "--project-instructions/--no-project-instructions",
        help="Read the project's AGENTS.md (or CLAUDE.md, GEMINI.md) into the system prompt.",
    ),
]
SessionOption = Annotated[
    str | None,
    typer.Option(
        "--session",
        "-s",
        help="Continue this session (id or unique prefix); a system prompt is --system.",
        autocompletion=_complete("session_ids"),
    ),
]
ContinueOption = Annotated[
    bool,
    typer.Option(
        "--continue",
        "-c",
        help="Continue the most recent session in this directory (not a sub-agent's).",
    ),
]
FileOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--file",
        "-f",
        help="Attach a file to the prompt (repeatable): text inline under its name, "
        "an image as an image.",
    ),
]
CwdOption = Annotated[
    Path | None, typer.Option("--cwd", help="Working directory (default: the current one).")
]

ConfigOption = Annotated[
    str | None,
    typer.Option(
        "--config", envvar="RAVEN_CONFIG", help="Config file to use instead of the default."
    ),
]


def load(
    config_option: str | None, face: str, creates: bool = False, quiet: bool = False
) -> tuple[RavenConfig, Paths]:
    """Set up logging for `face`, then read and validate the config.

    A config file named by `--config`/`RAVEN_CONFIG` must exist unless the command
    `creates` it. `quiet` keeps warnings off stderr (for commands that report them
    themselves); the log file still gets them.
    """
    import logging

    from raven.config import load_config, resolve_paths
    from raven.logs import setup_logging

    paths = resolve_paths(config_option)
    setup_logging(paths.logs_dir, face, logging.ERROR if quiet else logging.WARNING)
    return load_config(paths.config_file, paths.config_named and not creates), paths


def workdir(cwd: Path | None) -> Path:
    """The session directory: `--cwd` or the current one, which must exist."""
    from raven.config import ConfigError

    path = (cwd or Path.cwd()).expanduser().resolve()
    if not path.is_dir():
        raise ConfigError(f"--cwd {path}: not a directory")
    return path


def check_bind(host: str, allow_remote: bool) -> None:
    """Listening beyond loopback needs `--allow-remote`; raises `ConfigError` otherwise."""
    from raven.config import ConfigError
    from raven.origins import is_loopback

    if not is_loopback(host) and not allow_remote:
        raise ConfigError(
            f"refusing to listen on {host}, which is not a loopback address; "
            "pass --allow-remote if you mean it"
        )
