"""The terminal face: turn events rendered with rich, approvals and questions asked inline.

Answers go to the `out` console; tool activity, notices and prompts to `err`.
Reads input only through a `LineReader`.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from typing import Any

from rich.console import Console
from rich.markup import escape

from raven.engine import (
    AgentText,
    AgentThought,
    ApprovalRequest,
    Decision,
    Notice,
    PlanUpdated,
    Question,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    TurnEvent,
    Unanswered,
)

_RESULT_PREVIEW_LINES = 4


class LineReader:
    """Reads lines from a file descriptor without blocking the event loop.

    Several readers may wait at once (a chat's prompt, and a question a turn asks
    meanwhile): the fd has one pump, and each line goes to the newest reader still
    waiting, so the question gets the answer and the prompt the line after.
    """

    def __init__(self, fd: int = 0) -> None:
        self._fd = fd
        self._buffer = b""
        self._eof = False
        self._waiters: list[asyncio.Future[str | None]] = []
        self._pump: asyncio.Task[None] | None = None

    async def readline(self) -> str | None:
        """The next line without its newline; None at end of input."""
        if (line := self._take()) is not None or self._eof:
            return line
        waiter: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._run_pump())
        try:
            return await waiter
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _take(self) -> str | None:
        """A whole line from the buffer (the rest of it at end of input), if there is one."""
        if b"\n" not in self._buffer and not (self._eof and self._buffer):
            return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "replace").rstrip("\r")

    async def _run_pump(self) -> None:
        while self._waiters and not self._eof:
            try:
                chunk = await self._read_chunk()
            except OSError:  # the terminal went away (EIO): that is the end of input
                chunk = b""
            self._eof = not chunk
            self._buffer += chunk
            while self._someone_waits() and (line := self._take()) is not None:
                self._waiters.pop().set_result(line)
        if self._eof:
            while self._someone_waits():
                self._waiters.pop().set_result(None)

    def _someone_waits(self) -> bool:
        """Whether a reader waits; the newest then ends the list (those that gave up leave)."""
        while self._waiters and self._waiters[-1].done():
            self._waiters.pop()
        return bool(self._waiters)

    async def _read_chunk(self) -> bytes:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not ready.done():
                ready.set_result(None)

        try:
            loop.add_reader(self._fd, readable)
        except (PermissionError, ValueError, OSError):
            return await asyncio.to_thread(os.read, self._fd, 65536)
        try:
            await ready
        finally:
            loop.remove_reader(self._fd)
        return os.read(self._fd, 65536)


class _Waiting:
    """A spinner with what Raven waits for and for how long; rendered on each refresh."""

    def __init__(self, label: str) -> None:
        from rich.spinner import Spinner

        self._label = label
        self._started = time.monotonic()
        self._spinner = Spinner("dots", style="cyan")

    def __rich_console__(self, console: Console, options: Any) -> Any:
        from rich.text import Text

        elapsed = time.monotonic() - self._started
        self._spinner.text = Text(f"{self._label} · {elapsed:.0f}s", style="dim")
        yield self._spinner


class TerminalView:
    """Renders turn events; `markdown` re-renders the answer as Markdown while it streams.

    On a terminal, a spinner on stderr shows that Raven waits for the model or a
    tool; every line of output starts on a line of its own.
    """

    def __init__(self, out: Console, err: Console, markdown: bool) -> None:
        self._out = out
        self._err = err
        self._markdown = markdown
        self._text = ""
        self._live: Any = None
        """A rich `Live` while a Markdown answer streams (rich.markdown loads on first use)."""
        self._spinner: Any = None
        """A transient rich `Live` on stderr while Raven waits (terminals only)."""
        self._mid_line = False
        """A thought was printed without its line end."""
        self._titles: dict[str, str] = {}

    def __call__(self, event: TurnEvent) -> None:
        if isinstance(event, AgentText):
            self._stop_spinner()
            self._end_thought()
            self._answer(event.text)
            return
        if isinstance(event, AgentThought):
            self._stop_spinner()
            self._finish_answer()
            self._err.print(escape(event.text), style="dim italic", end="")
            self._mid_line = not event.text.endswith("\n")
            return
        self.pause()
        if isinstance(event, ToolCallStarted):
            self._titles[event.call_id] = event.title
            self._err.print(f"[cyan]→[/] {escape(event.title)}")
            self.waiting(f"running {event.title}")
        elif isinstance(event, ToolCallUpdated) and event.status != "in_progress":
            self._tool_done(event)
            self.waiting("thinking")
        elif isinstance(event, ToolCallUpdated) and event.content:
            self._err.print(f"  [dim]… {escape(event.content)}[/]")
            self.waiting(f"running {self._titles.get(event.call_id, event.call_id)}")
        elif isinstance(event, Notice):
            self._err.print(f"[bold red]![/] {escape(event.text)}")
        elif isinstance(event, PlanUpdated):
            marks = {"completed": "[green]✓[/]", "in_progress": "[yellow]▸[/]", "pending": "·"}
            self._err.print("[bold]plan[/]")
            for step in event.steps:
                self._err.print(f"  {marks[step.status]} {escape(step.content)}")
        elif isinstance(event, TurnEnded) and event.stop_reason == "cancelled":
            # On a terminal the ^C echo is still on the line.
            self._err.print(("\n" if self._err.is_terminal else "") + "[yellow]cancelled[/]")

    def waiting(self, label: str = "thinking") -> None:
        """Show a spinner with `label` and the time waited, until the next output."""
        if not self._err.is_terminal:
            return
        from rich.live import Live

        self._stop_spinner()
        self._spinner = Live(
            _Waiting(label), console=self._err, transient=True, refresh_per_second=8
        )
        self._spinner.start()

    def pause(self) -> None:
        """Finish the answer or thought being streamed, so other output can follow it."""
        self._stop_spinner()
        self._finish_answer()
        self._end_thought()

    def _end_thought(self) -> None:
        if self._mid_line:
            self._err.file.write("\n")
            self._err.file.flush()
            self._mid_line = False

    def _finish_answer(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        elif self._text and not self._text.endswith("\n"):
            self._out.file.write("\n")
            self._out.file.flush()
        self._text = ""

    def _stop_spinner(self) -> None:
        if self._spinner is not None:
            self._spinner.stop()
            self._spinner = None

    def _answer(self, delta: str) -> None:
        self._text += delta
        if not self._markdown:
            self._out.file.write(delta)
            self._out.file.flush()
            return
        from rich.live import Live
        from rich.markdown import Markdown

        if self._live is None:
            self._live = Live(console=self._out, auto_refresh=False, vertical_overflow="visible")
            self._live.start()
        self._live.update(Markdown(self._text), refresh=True)

    def _tool_done(self, event: ToolCallUpdated) -> None:
        title = escape(self._titles.get(event.call_id, event.call_id))
        if event.status == "completed":
            self._err.print(f"[green]✓[/] {title}")
        else:
            self._err.print(f"[red]✗[/] {title}")
        lines = (event.content or "").strip().splitlines()
        for line in lines[:_RESULT_PREVIEW_LINES]:
            self._err.print(f"  [dim]{escape(line[:200])}[/]")
        if len(lines) > _RESULT_PREVIEW_LINES:
            self._err.print(f"  [dim]… {len(lines) - _RESULT_PREVIEW_LINES} more lines[/]")


_CHOICES: dict[str, Decision] = {
    "y": "allow_once",
    "yes": "allow_once",
    "a": "allow_always",
    "always": "allow_always",
    "n": "reject_once",
    "no": "reject_once",
    "r": "reject_always",
    "never": "reject_always",
}


class TerminalAsker:
    """Asks on the terminal when one is attached; otherwise follows `--yes`."""

    def __init__(
        self,
        err: Console,
        reader: LineReader,
        view: TerminalView,
        interactive: bool,
        approve_all: bool = False,
    ) -> None:
        self._err = err
        self._reader = reader
        self._view = view
        self._interactive = interactive
        self._approve_all = approve_all

    async def approve(self, request: ApprovalRequest) -> Decision | Unanswered:
        if self._approve_all:
            return "allow_once"
        if not self._interactive:
            self._err.print(
                f"[yellow]denied[/] {escape(request.title)} "
                "(no terminal to ask on; pass --yes to allow)"
            )
            return "unanswered"
        self._view.pause()
        labels = {
            "allow_once": "[bold]y[/]es",
            "allow_always": "[bold]a[/]lways",
            "reject_once": "[bold]n[/]o",
            "reject_always": "neve[bold]r[/]",
        }
        choices = " / ".join(labels[d] for d in labels if d in request.offered)
        while True:
            self._err.print(f"[bold yellow]?[/] Allow {escape(request.title)}? {choices} ", end="")
            line = await self._reader.readline()
            if line is None:
                return "unanswered"
            decision = _CHOICES.get(line.strip().lower())
            if decision in request.offered:
                if decision in ("allow_once", "allow_always"):
                    self._view.waiting(f"running {request.title}")
                return decision

    async def ask(self, question: Question) -> str | None:
        if not self._interactive:
            return None
        self._view.pause()
        self._err.print(f"[bold yellow]?[/] {escape(question.text)}")
        for number, choice in enumerate(question.choices, start=1):
            self._err.print(f"  {number}. {escape(choice)}")
        self._err.print("[bold]answer:[/] ", end="")
        line = await self._reader.readline()
        if line is None:
            return None
        answer = line.strip()
        if answer.isdigit() and 1 <= int(answer) <= len(question.choices):
            return question.choices[int(answer) - 1]
        return answer or None


def stdin_is_terminal() -> bool:
    return sys.stdin.isatty()
