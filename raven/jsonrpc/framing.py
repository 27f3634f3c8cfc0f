"""Newline-delimited frames read from an asyncio stream, with a size ceiling.

A frame over the ceiling is skipped up to its newline and reported as
`FrameTooLarge`; the stream stays usable. Knows nothing of JSON.
"""

from __future__ import annotations

import asyncio

MAX_FRAME_BYTES = 16 * 1024 * 1024
READ_LIMIT_BYTES = 64 * 1024


class FrameTooLarge:
    """Stands in for a frame that was longer than allowed and was discarded."""

    def __init__(self, size: int) -> None:
        self.size = size


class FrameReader:
    def __init__(self, stream: asyncio.StreamReader, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self._stream = stream
        self._max = max_bytes

    async def read(self) -> bytes | FrameTooLarge | None:
        """The next frame without its newline, a `FrameTooLarge`, or None at end of stream."""
        parts: list[bytes] = []
        size = 0
        while True:
            try:
                chunk = await self._stream.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                if not exc.partial and not parts:
                    return None
                return self._finish(parts, exc.partial, size)
            except asyncio.LimitOverrunError as exc:
                chunk = await self._stream.readexactly(exc.consumed)
                size += len(chunk)
                if size <= self._max:
                    parts.append(chunk)
                else:
                    parts.clear()
                continue
            return self._finish(parts, chunk[:-1], size)

    def _finish(self, parts: list[bytes], body: bytes, size: int) -> bytes | FrameTooLarge:
        total = size + len(body)
        if total > self._max:
            return FrameTooLarge(total)
        return b"".join(parts) + body
