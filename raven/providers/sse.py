"""Server-sent events parsed from an async stream of lines. Knows no vendor."""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from dataclasses import dataclass


@dataclass(frozen=True)
class SSEEvent:
    event: str
    data: str


async def iter_sse(lines: AsyncIterable[str]) -> AsyncIterator[SSEEvent]:
    """Yield one event per blank-line-terminated block; comments are skipped."""
    event = ""
    data: list[str] = []
    async for raw in lines:
        line = raw.rstrip("\r")
        if not line:
            if data:
                yield SSEEvent(event or "message", "\n".join(data))
            event, data = "", []
        elif line.startswith(":"):
            continue
        else:
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            elif name == "event":
                event = value
    if data:
        yield SSEEvent(event or "message", "\n".join(data))
