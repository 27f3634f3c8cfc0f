"""Turn events rendered in the terminal with rich: the streamed answer, tool calls, plans.

Answers go to the `out` console; tool activity, notices and the spinner to `err`.
Never reads input.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from rich.console import Console
from rich.markup import escape

from raven.engine import (
    AgentText,
    AgentThought,
    CompactionText,
    CompactionUpdated,
    Notice,
    PlanUpdated,
    TitleChanged,
    ToolCallStarted,
    ToolCallUpdated,
    TurnEnded,
    TurnEvent,
    UsageUpdated,
)

_RESULT_PREVIEW_LINES = 4


MARKDOWN_REFRESH_S = 0.05
"""How often a streaming Markdown answer is rendered again (each render is of all of it)."""


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
        self._pieces: list[str] = []
        """The answer streamed so far, as it came (joined only to render it as Markdown)."""
        self._open_line = False
        """The answer so far does not end its line."""
        self._rendered_at = 0.0
        self._later: Any = None
        """The render due at the end of the refresh interval, for pieces not shown yet."""
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
        if _silent(event):
            return  # nothing to show: the spinner goes on while Raven waits
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
        elif isinstance(event, CompactionUpdated):
            self._compaction(event)
        elif isinstance(event, PlanUpdated):
            marks = {"completed": "[green]✓[/]", "in_progress": "[yellow]▸[/]", "pending": "·"}
            self._err.print("[bold]plan[/]")
            for step in event.steps:
                self._err.print(f"  {marks[step.status]} {escape(step.content)}")
        elif isinstance(event, TurnEnded) and event.stop_reason == "cancelled":
            # On a terminal the ^C echo is still on the line.
            self._err.print(("\n" if self._err.is_terminal else "") + "[yellow]cancelled[/]")

    def _compaction(self, event: CompactionUpdated) -> None:
        if event.status == "in_progress":
            self.waiting("compacting the conversation")
        elif event.status == "completed":
            sizes = ""
            if event.tokens_before is not None and event.tokens_after is not None:
                sizes = f" (about {event.tokens_before:,} → {event.tokens_after:,} tokens)"
            said = f"compacted: the model now sees a summary of the earlier conversation{sizes}"
            self._err.print(f"[dim]── {said} ──[/]")
            self.waiting("thinking")
        elif event.status == "failed":
            self._err.print(f"[bold red]![/] compaction failed: {escape(event.error or '')}")

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
            self._render()  # what is still due, at once
            self._live.stop()
            self._live = None
        elif self._open_line:
            self._out.file.write("\n")
            self._out.file.flush()
        self._pieces.clear()
        self._open_line = False

    def _stop_spinner(self) -> None:
        if self._spinner is not None:
            self._spinner.stop()
            self._spinner = None

    def _answer(self, delta: str) -> None:
        """Plain text goes out as it comes, in time linear in its size; Markdown is rendered
        again at most every `MARKDOWN_REFRESH_S`, what came meanwhile at the interval's
        end."""
        if not delta:
            return
        self._open_line = not delta.endswith("\n")
        if not self._markdown:
            self._out.file.write(delta)
            self._out.file.flush()
            return
        self._pieces.append(delta)
        if self._live is None:
            from rich.live import Live

            self._live = Live(console=self._out, auto_refresh=False, vertical_overflow="visible")
            self._live.start()
        else:
            wait = self._rendered_at + MARKDOWN_REFRESH_S - time.monotonic()
            if wait > 0 and self._later is not None:
                return
            if wait > 0 and (loop := _loop()) is not None:
                self._later = loop.call_later(wait, self._render)
                return
        self._render()

    def _render(self) -> None:
        from rich.markdown import Markdown

        if self._later is not None:
            self._later.cancel()
            self._later = None
        if self._live is None:
            return
        text = "".join(self._pieces)
        self._pieces[:] = [text]
        self._live.update(Markdown(text), refresh=True)
        self._rendered_at = time.monotonic()

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


def _loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # outside a loop, nothing can render later: each piece renders now
        return None


def _silent(event: TurnEvent) -> bool:
    """Events the terminal shows nothing for (a title, a usage count, a bare heartbeat, a
    summary being written)."""
    if isinstance(event, TitleChanged | UsageUpdated | CompactionText):
        return True
    if isinstance(event, ToolCallUpdated):
        return event.status == "in_progress" and not event.content
    return isinstance(event, TurnEnded) and event.stop_reason != "cancelled"
