"""A stored transcript printed for a person: messages, tool calls and their results."""

from __future__ import annotations

import json
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape

from raven.messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from raven.sessions import SessionRecord


def print_transcript(
    record: SessionRecord, messages: Sequence[Message], console: Console | None = None
) -> None:
    out = console or Console(highlight=False)
    out.print(f"[bold]{escape(record.title or '(untitled)')}[/]  [dim]{record.id}[/]")
    out.print(f"[dim]{escape(record.cwd)} · model {record.model} · mode {record.mode or '-'}[/]")
    for msg in messages:
        out.print()
        if isinstance(msg, UserMessage):
            out.print(f"[bold cyan]user[/] {escape(msg.text)}")
        elif isinstance(msg, AssistantMessage):
            if msg.thought:
                out.print(f"[dim italic]{escape(msg.thought)}[/]")
            if msg.text:
                out.print(f"[bold green]raven[/] {escape(msg.text)}")
            for call in msg.tool_calls:
                args = call.raw_arguments or json.dumps(call.arguments)
                out.print(f"[cyan]→ {call.name}[/] {escape(args)}")
        elif isinstance(msg, ToolResultMessage):
            mark = "[red]✗[/]" if msg.is_error else "[green]✓[/]"
            out.print(f"{mark} [dim]{escape(msg.name)}:[/] {escape(msg.content)}")
