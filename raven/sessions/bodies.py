"""A message's stored body, its JSON, written out in pieces when it is long.

A long answer (megabytes streamed by the model) is stored without a second copy of it in
memory: `body_pieces` gives its JSON a bounded piece at a time, and the SQLite store
writes them into the row's body as they come. The pieces are the same JSON
`MESSAGE_ADAPTER.dump_json` writes. Never touches a database.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from raven.messages import MESSAGE_ADAPTER, Message, content_chars

LONG_BODY_CHARS = 1 << 20
"""A message whose contents are this long or longer has its body written in pieces."""
PIECE_BYTES = 1 << 16
"""About how much of a long body each piece holds (a string is cut every this many
characters, and small values are gathered up to it)."""

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def is_long(message: Message) -> bool:
    """The message's body is written in pieces (`body_pieces`)."""
    return content_chars(message) >= LONG_BODY_CHARS


def body_pieces(message: Message) -> Iterator[bytes]:
    """The message's JSON, UTF-8, in pieces of about `PIECE_BYTES`: none holds more than a
    piece of any one string, so a long text is never copied whole."""
    gathered: list[bytes] = []
    size = 0
    for text in _json_text(MESSAGE_ADAPTER.dump_python(message, mode="json")):
        piece = text.encode()
        gathered.append(piece)
        size += len(piece)
        if size >= PIECE_BYTES:
            yield b"".join(gathered)
            gathered, size = [], 0
    if gathered:
        yield b"".join(gathered)


def _json_text(value: object) -> Iterator[str]:
    """`value` (as `dump_python(mode="json")` gives it) as compact JSON text, in pieces."""
    if isinstance(value, str) and len(value) > PIECE_BYTES:
        yield '"'
        for start in range(0, len(value), PIECE_BYTES):  # escaping is per character
            yield _encode(value[start : start + PIECE_BYTES])[1:-1]
        yield '"'
    elif isinstance(value, dict):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield ("," if i else "") + _encode(key) + ":"
            yield from _json_text(item)
        yield "}"
    elif isinstance(value, list):
        yield "["
        for i, item in enumerate(value):
            if i:
                yield ","
            yield from _json_text(item)
        yield "]"
    else:
        yield _encode(value)
