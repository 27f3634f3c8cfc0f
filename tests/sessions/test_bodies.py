"""A message's body written in pieces is the JSON written whole, and no piece holds a long
text whole."""

from __future__ import annotations

import pytest

from raven.messages import (
    MESSAGE_ADAPTER,
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    TokenUsage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from raven.sessions.bodies import LONG_BODY_CHARS, PIECE_BYTES, body_pieces, is_long

LONG = 'a "quoted" line\twith \\ ünïcode 🌱, \x00 and \u2028 in it\n' * 40_000


@pytest.mark.parametrize(
    "message",
    [
        AssistantMessage(
            text=LONG,
            thought="why " * 10,
            tool_calls=[ToolCall(id="c1", name="write_file", arguments={"path": "x", "n": 1.5})],
            usage=TokenUsage(by="m", input_tokens=3, output_tokens=4, estimated=True),
        ),
        ToolResultMessage(call_id="c1", name="read_file", content=LONG, is_error=True),
        UserMessage(parts=[TextPart(text="see"), ImagePart(data="QUJD" * 300_000, mime_type="x")]),
        AssistantMessage(text="short"),
    ],
)
def test_the_pieces_are_the_json_written_whole(message: Message) -> None:
    pieces = list(body_pieces(message))
    assert b"".join(pieces) == MESSAGE_ADAPTER.dump_json(message)
    assert MESSAGE_ADAPTER.validate_json(b"".join(pieces)) == message
    # a piece holds at most one cut of a string (6 bytes a character, escaped) and what
    # was gathered before it
    assert max(map(len, pieces)) <= 7 * PIECE_BYTES


def test_a_message_is_long_by_its_contents() -> None:
    assert is_long(AssistantMessage(text="x" * LONG_BODY_CHARS))
    assert is_long(AssistantMessage(thought="x" * (LONG_BODY_CHARS // 2), text="y" * 2**19))
    assert not is_long(AssistantMessage(text="x" * (LONG_BODY_CHARS - 1)))
