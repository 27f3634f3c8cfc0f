"""The terminal's view of a turn: a streamed answer comes out whole, as plain text or as
Markdown rendered again while it streams."""

from __future__ import annotations

import asyncio
import io

from rich.console import Console

from raven.engine import AgentText
from raven.terminal.view import TerminalView


def consoles(terminal: bool) -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, force_terminal=terminal, width=60, color_system=None), out


def test_a_plain_answer_comes_out_as_it_streams_and_ends_its_line() -> None:
    out, written = consoles(terminal=False)
    err, _ = consoles(terminal=False)
    view = TerminalView(out, err, markdown=False)
    pieces = [f"word{i} " for i in range(2000)] + ["last"]
    for piece in pieces:
        view(AgentText(piece))
    assert written.getvalue() == "".join(pieces)  # each piece as it came
    view.pause()
    assert written.getvalue() == "".join(pieces) + "\n"


async def test_markdown_streamed_faster_than_it_renders_is_shown_whole_soon_after() -> None:
    out, written = consoles(terminal=True)
    err, _ = consoles(terminal=False)
    view = TerminalView(out, err, markdown=True)
    for piece in ["# Shopping\n\n", "- eggs\n", "- milk\n", "- **bread**\n"]:
        view(AgentText(piece))  # all within one refresh interval: only the first renders
    assert "bread" not in written.getvalue()
    async with asyncio.timeout(5):  # the rest renders at the interval's end, unasked
        while "bread" not in written.getvalue():
            await asyncio.sleep(0.01)
    shown = written.getvalue()
    assert "Shopping" in shown and "# Shopping" not in shown  # rendered as a heading
    assert "**bread**" not in shown
    view(AgentText("- butter\n"))
    view.pause()  # the end renders what came last at once
    assert "butter" in written.getvalue()
