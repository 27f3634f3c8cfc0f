"""The `raven` program's entry point.

`raven acp` (editors start it for every window) and `raven --version` start
without loading typer; everything else, and any option the fast paths do not
read, goes through the typer application in `raven.cli.app`.
"""

from __future__ import annotations

import sys


def main() -> None:
    # httpx imports its own command-line client on every `import httpx` once click is
    # installed (uvicorn, which the MCP SDK needs, brings it): click, rich's progress and
    # syntax, pygments, about 80 ms of every process that speaks HTTP (encode/httpx#3547).
    # Raven never runs that client; None makes the import fail and httpx falls back to a
    # stub that says how to get it.
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    args = sys.argv[1:]
    if args[:1] == ["acp"]:
        from raven.cli.acp_launch import Usage, fast_options, launch
        from raven.errors import RavenError

        try:
            options = fast_options(args[1:])
        except Usage:
            pass  # typer reads it and explains
        else:
            try:
                sys.exit(launch(options["config"], options["model"], options["mode"]))
            except RavenError as exc:
                print(f"raven: error: {exc}", file=sys.stderr)
                sys.exit(exc.exit_code)
    if args == ["--version"]:
        print_version()
        sys.exit(0)
    from raven.cli.app import run_app

    run_app()


def print_version() -> None:
    """The version, the Python running it and the config file in use."""
    import platform

    from raven import __version__
    from raven.config.paths import resolve_paths

    print(f"raven {__version__}")
    print(f"python {platform.python_version()} ({sys.executable})")
    print(f"config {resolve_paths(None).config_file}")
