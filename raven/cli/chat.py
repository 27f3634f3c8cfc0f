"""`raven chat`: the command; the chat itself is `raven.terminal.chat` (or, with
`--attach`, `raven.terminal.attach`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from raven.cli.options import (
    ConfigOption,
    ContinueOption,
    CwdOption,
    FileOption,
    ModelOption,
    ModeOption,
    ProjectOption,
    SessionOption,
    SystemOption,
)


def chat_command(
    model: ModelOption = None,
    mode: ModeOption = None,
    session: SessionOption = None,
    system: SystemOption = None,
    files: FileOption = None,
    cwd: CwdOption = None,
    resume_last: ContinueOption = False,
    pick: Annotated[
        bool, typer.Option("--resume", "-r", help="Pick a recent session to continue.")
    ] = False,
    attach: Annotated[
        str | None,
        typer.Option(
            "--attach",
            help="Chat through a running gateway (its URL, or `auto` for the local one).",
        ),
    ] = None,
    project: ProjectOption = True,
    config: ConfigOption = None,
) -> None:
    """Chat with Raven in the terminal."""
    import asyncio

    from raven.cli.options import load, workdir
    from raven.compose import build_runtime
    from raven.terminal.chat import Chat

    cfg, paths = load(config, "cli")
    if not project:
        cfg = cfg.model_copy(update={"project_instructions": False})
    cwd_path = workdir(cwd)
    from raven.attachments import file_parts

    attached = file_parts(files or [])
    if attach is not None:
        if files:
            raise typer.BadParameter("attach files in the UI you chat through", param_hint="--file")
        if system is not None:
            raise typer.BadParameter("the gateway's sessions keep their own", param_hint="--system")
        from raven.gateway.auth import TOKEN_FILE
        from raven.gateway.serve import running_url
        from raven.terminal.attach import attach as attach_to

        url = running_url(paths.data_dir) if attach == "auto" else attach
        token_file = paths.config_dir / TOKEN_FILE
        if url is None or not token_file.exists():
            from raven.config import ConfigError

            raise ConfigError("no running gateway found; start one with `raven gateway`")
        token = token_file.read_text(encoding="utf-8").strip()
        asyncio.run(attach_to(url, token, cwd_path, session))
        return

    async def main() -> None:
        runtime = build_runtime(cfg, paths, face="chat")
        try:
            chat = Chat(runtime, cwd_path, system, attached, _history(paths.data_dir, cwd_path))
            start = session
            if resume_last and start is None:
                start = await runtime.latest_session(str(cwd_path))
            if pick and start is None:
                start = await chat.pick()
            await chat.run(start, model, mode)
        finally:
            await runtime.aclose()

    asyncio.run(main())


def _history(data_dir: Path, cwd: Path) -> Path | None:
    """The prompt's history file when the chat reads a terminal (a pipe has none)."""
    import sys

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return None
    from raven.terminal.prompt import history_file

    return history_file(data_dir, cwd)
