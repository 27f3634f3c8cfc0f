"""`raven acp`: the ACP server on stdin/stdout, launched by editors."""

from __future__ import annotations

from raven.cli.options import ConfigOption


def acp_command(config: ConfigOption = None) -> int:
    """Serve the Agent Client Protocol on stdin/stdout (editors launch this)."""
    import asyncio

    from raven.acp.stdio import reserve_stdout, serve_stdio
    from raven.cli.runtime import build_runtime
    from raven.config import load_config, resolve_paths
    from raven.engine import Runtime
    from raven.logs import setup_logging

    paths = resolve_paths(config)
    if paths.config_named:
        load_config(paths.config_file, must_exist=True)
    frames_fd = reserve_stdout()
    setup_logging(paths.logs_dir, "acp")

    def runtime() -> Runtime:
        return build_runtime(load_config(paths.config_file), paths, face="acp")

    return asyncio.run(serve_stdio(runtime, frames_fd))
