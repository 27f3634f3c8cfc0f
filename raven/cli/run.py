"""`raven run`: one turn from the command line; the answer on stdout, the rest on stderr."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from raven.cli.options import ConfigOption

if TYPE_CHECKING:
    from rich.console import Console

    from raven.config import Paths, RavenConfig

EXIT_TURN_FAILED = 1
EXIT_STOPPED_SHORT = 3
EXIT_CANCELLED = 130


MAX_STDIN_BYTES = 1024 * 1024


def run_command(
    prompt: Annotated[
        str | None,
        typer.Argument(help="What to ask Raven; `-` or none reads it from piped stdin."),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model id.")] = None,
    mode: Annotated[str | None, typer.Option("--mode", help="Mode id.")] = None,
    session: Annotated[
        str | None,
        typer.Option("--session", "-s", help="Continue this session (id or unique prefix)."),
    ] = None,
    cwd: Annotated[
        Path | None, typer.Option("--cwd", help="Working directory (default: the current one).")
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Approve every tool call without asking.")
    ] = False,
    config: ConfigOption = None,
) -> int:
    """Run one turn and stream the answer to stdout."""
    import asyncio

    from raven.cli.options import load

    text = _prompt_text(prompt)
    cfg, paths = load(config, "cli")
    return asyncio.run(_run(cfg, paths, text, model, mode, session, cwd, yes))


def _prompt_text(prompt: str | None) -> str:
    """The prompt: the argument, or stdin for `-` or when none is given and stdin is piped."""
    import sys

    if prompt is None and sys.stdin.isatty():
        raise typer.BadParameter("give a prompt, or pipe one in", param_hint="PROMPT")
    if prompt is None or prompt == "-":
        data = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
        if len(data) > MAX_STDIN_BYTES:
            raise typer.BadParameter(
                f"stdin holds more than {MAX_STDIN_BYTES} bytes", param_hint="PROMPT"
            )
        prompt = data.decode("utf-8", "replace")
    if not prompt.strip():
        raise typer.BadParameter("the prompt is empty", param_hint="PROMPT")
    return prompt


async def _run(
    cfg: RavenConfig,
    paths: Paths,
    prompt: str,
    model: str | None,
    mode: str | None,
    session_id: str | None,
    cwd: Path | None,
    yes: bool,
) -> int:
    import signal
    import sys

    from rich.console import Console

    from raven.cli.options import workdir
    from raven.cli.runtime import build_runtime
    from raven.cli.terminal import LineReader, TerminalAsker, TerminalView, stdin_is_terminal
    from raven.engine import TurnEnded, TurnEvent, run_turn
    from raven.messages import TextPart
    from raven.signals import STOP_SIGNALS, StopSignals

    runtime = build_runtime(cfg, paths, face="cli")
    try:
        if session_id:
            live = await runtime.open_session(await runtime.find_session(session_id))
            if model:
                await runtime.set_model(live, model)
            if mode:
                await runtime.set_mode(live, mode)
        else:
            live = await runtime.new_session(workdir(cwd), model, mode)
        out = Console(file=sys.stdout, highlight=False, soft_wrap=True)
        err = Console(file=sys.stderr, highlight=False, soft_wrap=True)
        view = TerminalView(out, err, markdown=False)
        asker = TerminalAsker(err, LineReader(), view, stdin_is_terminal(), approve_all=yes)
        ended: list[TurnEnded] = []

        def emit(event: TurnEvent) -> None:
            view(event)
            if isinstance(event, TurnEnded):
                ended.append(event)

        with StopSignals(lambda _: live.cancel_turn(), (signal.SIGINT, *STOP_SIGNALS)) as signals:
            view.waiting()
            stop = await run_turn(live, [TextPart(text=prompt)], asker, emit)
        view.pause()
        err.print(f"[dim]session {live.id} · model {live.model.id}[/]")
        code = _exit_code(stop, ended[-1].error if ended else None, err)
        return signals.exit_code or code
    finally:
        await runtime.aclose()


def _exit_code(stop: str, error: str | None, err: Console) -> int:
    if stop == "cancelled":
        return EXIT_CANCELLED
    if error:
        return EXIT_TURN_FAILED
    if stop != "end_turn":
        reasons = {
            "max_tokens": "the model hit its output token limit",
            "max_turn_requests": "the turn hit limits.maxTurnSteps",
            "refusal": "the model refused",
        }
        err.print(f"[yellow]stopped:[/] {reasons.get(stop, stop)}")
        return EXIT_STOPPED_SHORT
    return 0
