"""`raven acp`: the ACP server on stdin/stdout, launched by editors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from raven.cli.options import ConfigOption

if TYPE_CHECKING:
    from raven.config import RavenConfig


def acp_command(
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model of new sessions (a model id).")
    ] = None,
    mode: Annotated[str | None, typer.Option("--mode", help="Mode of new sessions.")] = None,
    config: ConfigOption = None,
) -> int:
    """Serve the Agent Client Protocol on stdin/stdout (editors launch this)."""
    import asyncio

    from raven.acp.stdio import reserve_stdout, serve_stdio
    from raven.cli.runtime import build_runtime
    from raven.config import load_config, resolve_paths
    from raven.engine import Runtime
    from raven.logs import setup_logging

    paths = resolve_paths(config)
    if paths.config_named or model or mode:
        # Mistakes in what the editor's settings pass are exit 2 before any frame.
        _with_defaults(load_config(paths.config_file, paths.config_named), model, mode)
    frames_fd = reserve_stdout()
    setup_logging(paths.logs_dir, "acp")

    def runtime() -> Runtime:
        cfg = _with_defaults(load_config(paths.config_file), model, mode)
        return build_runtime(cfg, paths, face="acp")

    return asyncio.run(serve_stdio(runtime, frames_fd))


def _with_defaults(cfg: RavenConfig, model: str | None, mode: str | None) -> RavenConfig:
    """`cfg` with `--model`/`--mode` as the defaults of new sessions; raises `ConfigError`."""
    from raven.config import ECHO_MODEL_ID, ConfigError

    if model and cfg.find_model(model) is None:
        known = ", ".join([m.id for m in cfg.models] + [ECHO_MODEL_ID])
        raise ConfigError(f"--model {model!r}: no such model; configured: {known}")
    if mode and cfg.find_mode(mode) is None:
        known = ", ".join(m.id for m in cfg.modes) or "none are declared"
        raise ConfigError(f"--mode {mode!r}: no such mode; modes: {known}")
    update = {"default_model": model or cfg.default_model, "default_mode": mode or cfg.default_mode}
    return cfg.model_copy(update=update)
