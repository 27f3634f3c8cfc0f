"""A stored transcript printed for a person: messages, tool calls and their results.

Everything shown here is masked first (`masked`); never prints a stored credential.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from raven.messages import (
    AssistantMessage,
    CompactionMessage,
    Message,
    TextPart,
    ToolResultMessage,
    UserMessage,
    shown,
)
from raven.redact import redact, redact_json

if TYPE_CHECKING:
    from raven.engine import SessionRecord


def masked(messages: Sequence[Message]) -> list[Message]:
    """The messages with every recognised credential masked in what they say, before anything
    is serialised (in JSON text a secret after an escaped newline would slip past)."""
    out: list[Message] = []
    for msg in messages:
        if isinstance(msg, UserMessage):
            parts = [
                p.model_copy(update={"text": redact(p.text)}) if isinstance(p, TextPart) else p
                for p in msg.parts
            ]
            out.append(msg.model_copy(update={"parts": parts}))
        elif isinstance(msg, AssistantMessage):
            calls = [
                c.model_copy(
                    update={
                        "arguments": redact_json(c.arguments),
                        "raw_arguments": c.raw_arguments and redact(c.raw_arguments),
                        "title": c.title and redact(c.title),
                    }
                )
                for c in msg.tool_calls
            ]
            update = {"text": redact(msg.text), "thought": redact(msg.thought)}
            out.append(msg.model_copy(update={**update, "tool_calls": calls}))
        elif isinstance(msg, CompactionMessage):
            out.append(msg.model_copy(update={"summary": redact(msg.summary)}))
        else:
            out.append(msg.model_copy(update={"content": redact(msg.content)}))
    return out


def print_transcript(
    record: SessionRecord, messages: Sequence[Message], console: Console | None = None
) -> None:
    out = console or Console(highlight=False)
    messages = masked(messages)
    out.print(f"[bold]{escape(redact(record.title) or '(untitled)')}[/]  [dim]{record.id}[/]")
    about = f"{record.cwd} · model {record.model} · mode {record.mode or '-'}"
    out.print(f"[dim]{escape(about)}[/]")
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
                out.print(f"[cyan]→ {escape(call.name)}[/] {escape(args)}")
        elif isinstance(msg, ToolResultMessage):
            mark = "[red]✗[/]" if msg.is_error else "[green]✓[/]"
            out.print(f"{mark} [dim]{escape(msg.name)}:[/] {escape(shown(msg.content))}")
        elif isinstance(msg, CompactionMessage):
            out.print("[dim]── compacted: the model sees this summary of what came before ──[/]")
            out.print(f"[dim]{escape(msg.summary)}[/]")
    if record.failure:
        out.print()
        out.print(f"[red]the last turn failed:[/] {escape(redact(record.failure))}")


def markdown_transcript(record: SessionRecord, messages: Sequence[Message]) -> str:
    """The transcript as Markdown: a heading, then each message, tool call and result."""
    messages = masked(messages)
    lines = [f"# {redact(record.title) or '(untitled)'}", ""]
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
        elif isinstance(msg, CompactionMessage):
            lines += ["## Compacted", "", "> " + msg.summary.replace("\n", "\n> ")]
    return "\n".join(lines) + "\n"
