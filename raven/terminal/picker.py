"""Choosing one of a few lines on a terminal: arrow keys and Enter, or a number.

On a terminal the list is drawn on stderr and redrawn as the arrows move the mark;
Enter picks, Esc or q picks nothing. Elsewhere the lines are numbered and a number
is read. Restores the terminal's mode on every path.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Iterator, Sequence

from rich.console import Console
from rich.markup import escape

from raven.terminal.reader import LineReader

UP, DOWN = (b"\x1b[A", b"\x1bOA", b"k"), (b"\x1b[B", b"\x1bOB", b"j")
ENTER, CANCEL = (b"\r", b"\n"), (b"\x1b", b"q", b"\x03", b"\x04")


async def pick(lines: Sequence[str], err: Console, reader: LineReader, question: str) -> int | None:
    """The index of the line chosen, or None."""
    if sys.stdin.isatty() and err.is_terminal:
        return await _by_keys(lines, err, question)
    for number, line in enumerate(lines, start=1):
        err.print(f"{number:>2}. {escape(line)}")
    err.print(f"[bold]{question}[/] (number, or Enter for none) ", end="")
    answer = ((await reader.readline()) or "").strip()
    return int(answer) - 1 if answer.isdigit() and 1 <= int(answer) <= len(lines) else None


async def _by_keys(lines: Sequence[str], err: Console, question: str) -> int | None:
    chosen = 0
    err.print(f"[bold]{question}[/] [dim](↑/↓, Enter; Esc for none)[/]")
    with _cbreak(0):
        while True:
            for i, line in enumerate(lines):
                mark = "[bold cyan]›[/]" if i == chosen else " "
                style = "bold" if i == chosen else "dim"
                err.print(f"{mark} [{style}]{escape(line)}[/]")
            keys = _keys(await asyncio.to_thread(os.read, 0, 64))
            err.file.write(f"\x1b[{len(lines)}A\x1b[J")  # back over the list, to redraw it
            for key in keys or [b"\x04"]:
                if key in ENTER:
                    return chosen
                if key in CANCEL:
                    return None
                if key in UP:
                    chosen = (chosen - 1) % len(lines)
                elif key in DOWN:
                    chosen = (chosen + 1) % len(lines)


def _keys(data: bytes) -> list[bytes]:
    """The keys in what one read returned: arrow escape sequences whole, others a byte each."""
    keys, i = [], 0
    while i < len(data):
        size = 3 if data[i : i + 1] == b"\x1b" and data[i + 1 : i + 2] in (b"[", b"O") else 1
        keys.append(data[i : i + size])
        i += size
    return keys


@contextlib.contextmanager
def _cbreak(fd: int) -> Iterator[None]:
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd, termios.TCSANOW)  # keeps keys typed ahead (tty's default drops them)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
