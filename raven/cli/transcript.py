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


def markdown_transcript(record: SessionRecord, messages: Sequence[Message]) -> str:
    """The transcript as Markdown: a heading, then each message, tool call and result."""
    lines = [f"# {record.title or '(untitled)'}", ""]
    lines.append(f"`{record.id}` · {record.cwd} · model {record.model} · {record.created_at}")
    for msg in messages:
        lines.append("")
        if isinstance(msg, UserMessage):
            lines += ["## You", "", msg.text]
        elif isinstance(msg, AssistantMessage):
            lines.append("## Raven")
            if msg.thought:
                lines += ["", "> " + msg.thought.replace("\n", "\n> ")]
            if msg.text:
                lines += ["", msg.text]
            for call in msg.tool_calls:
                args = call.raw_arguments or json.dumps(call.arguments, ensure_ascii=False)
                lines += [
                    "",
                    f"**Tool call** {call.title or call.name}",
                    "",
                    "```json",
                    args,
                    "```",
                ]
        elif isinstance(msg, ToolResultMessage):
            status = "failed" if msg.is_error else "result"
            lines += [f"**Tool {status}** ({msg.name})", "", "```", msg.content, "```"]
    return "\n".join(lines) + "\n"
