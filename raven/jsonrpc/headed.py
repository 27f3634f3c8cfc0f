"""Content-Length framing, as LSP's base protocol has it: `Content-Length: N`, a blank
line, then N bytes of JSON. Spoken by A2A over stdio (`raven a2a stdio`, and Raven as
its client). Reads within limits and never guesses past a header it cannot read.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

MAX_HEADER_BYTES = 8192
_SEPARATOR = b"\r\n\r\n"
_DISCARD_CHUNK = 65536


class FrameError(Exception):
    """A frame's header block cannot be read: the stream cannot be resynchronised."""


class FrameTooLarge(Exception):
    """A frame's body is longer than the limit (and was skipped)."""

    def __init__(self, length: int, limit: int) -> None:
        super().__init__(f"Message too large: {length} bytes, the limit is {limit}")


async def read_frame(reader: asyncio.StreamReader, limit: int) -> bytes | None:
    """The next frame's body; None at the end of input. Raises `FrameError` or (the body
    skipped) `FrameTooLarge`."""
    try:
        block = await reader.readuntil(_SEPARATOR)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise FrameError("the input ended inside a frame's headers") from None
    except asyncio.LimitOverrunError:
        raise FrameError("a frame's headers are too long") from None
    if len(block) > MAX_HEADER_BYTES:
        raise FrameError("a frame's headers are too long")
    length = _content_length(block[: -len(_SEPARATOR)])
    if length > limit:
        left = length
        while left:
            chunk = await reader.read(min(left, _DISCARD_CHUNK))
            if not chunk:
                raise FrameError("the input ended inside a frame")
            left -= len(chunk)
        raise FrameTooLarge(length, limit)
    try:
        return await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise FrameError("the input ended inside a frame") from None


def _content_length(block: bytes) -> int:
    try:
        text = block.decode("ascii")
    except UnicodeDecodeError:
        raise FrameError("a frame's headers are not ASCII") from None
    length: int | None = None
    for line in text.split("\r\n"):
        if not line:
            continue
        name, colon, value = line.partition(":")
        if not colon or name != name.strip():
            raise FrameError(f"malformed header line {line[:80]!r}")
        if name.lower() == "content-length":
            value = value.strip()
            if not value.isdigit():
                raise FrameError(f"bad Content-Length {value[:20]!r}")
            length = int(value)
    if length is None:
        raise FrameError("a frame has no Content-Length")
    return length


def frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, ensure_ascii=False).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body
