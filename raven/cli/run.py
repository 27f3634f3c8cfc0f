"""`raven run`: one turn from the command line; the answer on stdout, the rest on stderr."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

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

if TYPE_CHECKING:
    from rich.console import Console

    from raven.config import Paths, RavenConfig
    from raven.engine import LiveSession, Runtime
    from raven.messages import Part

EXIT_TURN_FAILED = 1
EXIT_STOPPED_SHORT = 3
EXIT_CANCELLED = 130


MAX_STDIN_BYTES = 1024 * 1024


def run_command(
    prompt: Annotated[
        str | None,
        typer.Argument(help="What to ask Raven; `-` or none reads it from piped stdin."),
    ] = None,
    model: ModelOption = None,
    mode: ModeOption = None,
    session: SessionOption = None,
    system: SystemOption = None,
    files: FileOption = None,
    cwd: CwdOption = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Approve every tool call without asking.")
    ] = False,
    resume_last: ContinueOption = False,
    output: Annotated[
        Output, typer.Option("--output", "-o", help="text, or json / jsonl for scripts.")
    ] = "text",
    usage: Annotated[
        bool, typer.Option("--usage", "-u", help="Show the tokens the turn used, after it.")
    ] = False,
    project: ProjectOption = True,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", help="Say which project instructions were read."),
    ] = False,
    config: ConfigOption = None,
) -> int:
    """Run one turn and stream the answer to stdout.

    Piped text comes first, in a fenced block, then PROMPT (`git diff | raven run "review"`).
    """
    import asyncio

    from raven.attachments import file_parts
    from raven.cli.options import load

    text = _prompt_text(prompt)
    attached = file_parts(files or [])
    cfg, paths = load(config, "cli")
    if not project:
        cfg = cfg.model_copy(update={"project_instructions": False})
    options = RunOptions(
        model, mode, session, cwd, yes, resume_last, output, system, attached, usage, verbose
    )
    return asyncio.run(_run(cfg, paths, text, options))


Output = Literal["text", "json", "jsonl"]


@dataclass(frozen=True)
class RunOptions:
    model: str | None
    mode: str | None
    session: str | None
    cwd: Path | None
    yes: bool
    resume_last: bool
    output: Output
    system: str | None = None
    attached: list[Part] = field(default_factory=list)
    """Parts of the prompt from `--file`, before its text."""
    usage: bool = False
    verbose: bool = False


def _prompt_text(prompt: str | None) -> str:
    """The prompt: the argument, or stdin for `-` or when none is given and stdin is piped;
    with both, the piped text first in a fenced block, then the argument (as `llm` does)."""
    import sys

    if prompt is None and sys.stdin.isatty():
        raise typer.BadParameter("give a prompt, or pipe one in", param_hint="PROMPT")
    if prompt is None or prompt == "-":
        prompt = _read_stdin()
    elif _stdin_is_piped() and (piped := _read_stdin()).strip():
        prompt = f"```\n{piped.rstrip()}\n```\n\n{prompt}"
    if not prompt.strip():
        raise typer.BadParameter("the prompt is empty", param_hint="PROMPT")
    return prompt


def _stdin_is_piped() -> bool:
    """stdin is a pipe or a file (not a terminal, /dev/null or a socket)."""
    import os
    import stat

    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode)


def _read_stdin() -> str:
    import sys

    data = sys.stdin.buffer.read(MAX_STDIN_BYTES + 1)
    if len(data) > MAX_STDIN_BYTES:
        raise typer.BadParameter(
            f"stdin holds more than {MAX_STDIN_BYTES} bytes", param_hint="PROMPT"
        )
    return data.decode("utf-8", "replace")


async def _run(cfg: RavenConfig, paths: Paths, prompt: str, options: RunOptions) -> int:
    import json
    import signal
    import sys

    from rich.console import Console

    from raven.cli.options import workdir
    from raven.cli.run_record import TurnRecord, summary
    from raven.compose import build_runtime
    from raven.engine import TurnEvent, run_turn
    from raven.engine.codec import event_json
    from raven.messages import TextPart
    from raven.signals import STOP_SIGNALS, StopSignals
    from raven.terminal.asker import TerminalAsker
    from raven.terminal.reader import LineReader, stdin_is_terminal
    from raven.terminal.view import TerminalView

    runtime = build_runtime(cfg, paths, face="cli")
    try:
        live = await _session(runtime, options, workdir(options.cwd))
        err = Console(file=sys.stderr, highlight=False, soft_wrap=True)
        # For scripts, stdout carries only JSON; the person watching reads stderr.
        out = (
            err
            if options.output != "text"
            else Console(file=sys.stdout, highlight=False, soft_wrap=True)
        )
        if options.verbose:
            read = ", ".join(live.project.names(live.cwd)) or "none"
            err.print(f"project instructions: {read}", style="dim", markup=False)
        view = TerminalView(out, err, markdown=False)
        interactive = stdin_is_terminal()
        asker = TerminalAsker(err, LineReader(), view, interactive, approve_all=options.yes)
        record = TurnRecord(keep_answer=options.output == "json")
        reader_gone = False

        def emit(event: TurnEvent) -> None:
            nonlocal reader_gone
            record.add(event)
            if reader_gone:
                return
            try:
                view(event)
                if options.output == "jsonl":
                    print(json.dumps(event_json(event), ensure_ascii=False), flush=True)
            except BrokenPipeError:  # `raven run … | head`: the reader has what it wanted
                reader_gone = True
                _discard_stdout()
                live.cancel_turn()

        before = live.version
        with StopSignals(lambda _: live.cancel_turn(), (signal.SIGINT, *STOP_SIGNALS)) as signals:
            view.waiting()
            parts = [*options.attached, TextPart(text=prompt)]
            stop = await run_turn(live, parts, asker, emit)
        view.pause()
        if reader_gone:
            return BROKEN_PIPE_EXIT
        err.print(f"session {live.id} · model {live.model.id}", style="dim", markup=False)
        if options.usage or options.output == "json":
            from raven.usage import as_json, describe, totals

            turn_totals = totals(live.since(before))
            if options.usage:
                err.print(f"Token usage: {describe(turn_totals, cfg.prices())}", markup=False)
            if options.output == "json":
                spent = as_json(turn_totals, cfg.prices())
                said = summary(record, stop, live.id, live.model.id, spent)
                print(json.dumps(said, ensure_ascii=False))
        code = _exit_code(stop, record.ended.error if record.ended else None, err)
        return signals.exit_code or code
    finally:
        await runtime.aclose()


async def _session(runtime: Runtime, options: RunOptions, cwd: Path) -> LiveSession:
    """The session to run in: `--session`, `--continue`d, or a new one."""
    from raven.config import ConfigError

    session_id = options.session
    if options.resume_last and session_id is None:
        session_id = await runtime.latest_session(str(cwd))
        if session_id is None:
            raise ConfigError(f"--continue: no session yet in {cwd}")
    if session_id is None:
        live = await runtime.new_session(cwd, options.model, options.mode)
    else:
        live = await runtime.open_session(await _find(runtime, session_id), reopen=True)
        if options.model:
            await runtime.set_model(live, options.model)
        if options.mode:
            await runtime.set_mode(live, options.mode)
    runtime.set_system_prompt(live, options.system)
    return live


async def _find(runtime: Runtime, session_id: str) -> str:
    """The session `-s/--session` names; one it does not name says what `-s` is (`llm`
    users mean a system prompt by it)."""
    from raven.engine import SessionNotFound
    from raven.errors import RavenError

    try:
        return await runtime.find_session(session_id)
    except SessionNotFound:
        raise RavenError(
            f"no session {session_id!r}: -s is --session (a session id); "
            "for a system prompt, use --system"
        ) from None


BROKEN_PIPE_EXIT = 141
"""What a program the shell sees killed by SIGPIPE exits with (128 + 13), here said quietly."""


def _discard_stdout() -> None:
    """Send what is still written to stdout (and Python's flush at exit) nowhere."""
    import os
    import sys

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


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
        err.print(f"stopped: {reasons.get(stop, stop)}", style="yellow", markup=False)
        return EXIT_STOPPED_SHORT
    return 0
