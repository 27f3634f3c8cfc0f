"""Approvals and questions asked inline in the terminal, read through a `LineReader`.

Without a terminal it asks nobody: it follows `--yes` or answers "unanswered".
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from raven.engine import ApprovalRequest, Decision, Preview, Question, Unanswered, preview_lines
from raven.terminal.reader import LineReader
from raven.terminal.view import TerminalView

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


_KEYS = {
    "allow_once": "y (yes, this once)",
    "allow_always": "a (always)",
    "reject_once": "n (no)",
    "reject_always": "r (never)",
}


def _styled(preview: Preview) -> list[str]:
    """The preview's lines as rich markup: the command bold, a diff red and green."""
    lines = preview_lines(preview)
    if isinstance(preview, str):
        return [f"  [bold]{escape(line)}[/]" for line in lines]
    styles = {"+": "green", "-": "red", "@": "cyan"}
    return [f"  [dim]{escape(lines[0])}[/]"] + [
        f"  [{styles.get(line[:1], 'dim')}]{escape(line)}[/]" for line in lines[1:]
    ]


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
        if request.preview is not None:
            for shown in _styled(request.preview):
                self._err.print(shown, highlight=False)
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
            keys = ", ".join(_KEYS[d] for d in _KEYS if d in request.offered)
            self._err.print(f"[dim]answer {keys}[/]")

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
