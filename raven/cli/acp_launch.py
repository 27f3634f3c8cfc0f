"""Starting `raven acp`: reading its options, checking them, and serving stdio.

Imports only what reaching the first frame needs (no typer, no pydantic, no engine):
editors start `raven acp` for every window. `raven acp --help` goes through typer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from raven.errors import RavenError

if TYPE_CHECKING:
    from raven.engine import Runtime

ECHO_MODEL_ID = "echo"
_VALUED = {"--config": "config", "--model": "model", "-m": "model", "--mode": "mode"}


class Usage(Exception):
    """Options the start-up path does not read; typer reads them and explains."""


class StartError(RavenError):
    """What the editor passed cannot work; said on stderr before any frame."""

    exit_code = 2


def fast_options(argv: Sequence[str]) -> dict[str, str | None]:
    """`--config`, `--model`/`-m` and `--mode` from `argv`; raises `Usage` for anything else."""
    options: dict[str, str | None] = {"config": None, "model": None, "mode": None}
    items = list(argv)
    while items:
        item = items.pop(0)
        name, eq, value = item.partition("=")
        if name not in _VALUED or (not eq and not items) or (eq and name == "-m"):
            raise Usage(item)
        options[_VALUED[name]] = value if eq else items.pop(0)
    return options


def launch(config: str | None, model: str | None, mode: str | None) -> int:
    """Serve ACP on stdin/stdout until end of input or a stop signal; the exit code."""
    import asyncio

    from raven.acp.stdio import serve_stdio
    from raven.config.paths import resolve_paths
    from raven.jsonrpc.stdio import reserve_stdout
    from raven.logs import setup_logging

    paths = resolve_paths(config)
    check_start(paths.config_file, paths.config_named, model, mode)
    frames_fd = reserve_stdout()
    setup_logging(paths.logs_dir, "acp")

    def runtime() -> Runtime:
        from raven.compose import build_runtime
        from raven.config import load_config

        cfg = load_config(paths.config_file)
        cfg = cfg.model_copy(
            update={
                "default_model": model or cfg.default_model,
                "default_mode": mode or cfg.default_mode,
            }
        )
        from raven.config import is_subagent
        from raven.engine import SUBAGENT_FACE

        return build_runtime(cfg, paths, face=SUBAGENT_FACE if is_subagent() else "acp")

    return asyncio.run(serve_stdio(runtime, frames_fd))


def check_start(config_file: Path, named: bool, model: str | None, mode: str | None) -> None:
    """Mistakes in what an editor's settings pass are exit 2 before any frame.

    A named config file must exist; `--model`/`--mode` must be declared in it. The
    file is read as plain JSON here; it is validated when the first session needs it.
    """
    if named and not config_file.exists():
        raise StartError(
            f"{config_file}: no such config file (named by --config or RAVEN_CONFIG); "
            "`raven config init --config PATH` creates one"
        )
    if not (model or mode):
        return
    try:
        data = json.loads(config_file.read_text(encoding="utf-8")) if config_file.exists() else {}
    except (OSError, ValueError) as exc:
        raise StartError(f"{config_file}: cannot read: {exc}") from None
    models = [m.get("id") for m in data.get("models", []) if isinstance(m, dict)]
    modes = [m.get("id") for m in data.get("modes", []) if isinstance(m, dict)]
    if model and model not in [*models, ECHO_MODEL_ID]:
        known = ", ".join(str(m) for m in [*models, ECHO_MODEL_ID])
        raise StartError(f"--model {model!r}: no such model; configured: {known}")
    if mode and mode not in modes:
        known = ", ".join(str(m) for m in modes) or "none are declared"
        raise StartError(f"--mode {mode!r}: no such mode; modes: {known}")
