"""Streamed text re-cut for redaction: a credential in any pieces is masked, nothing is lost."""

from __future__ import annotations

import random

import pytest

from raven.redact import redact
from raven.safe_chunks import SafeChunks
from tests.test_redact import MUST


def streamed(text: str, sizes: random.Random) -> str:
    """`text` fed to `SafeChunks` in random small pieces, each piece redacted alone."""
    chunks, out, i = SafeChunks(), [], 0
    while i < len(text):
        n = sizes.randint(1, 10)
        out.append(redact(chunks.feed(text[i : i + n])))
        i += n
    return "".join(out) + redact(chunks.flush())


@pytest.mark.parametrize("text, secret", MUST)
def test_a_credential_streamed_in_any_pieces_is_masked(text: str, secret: str) -> None:
    sizes = random.Random(text)
    for before, after in [("", ""), ("use ", " now."), ("x\n(", ")\nnext"), ("a: ", "")]:
        for _ in range(100):
            shown = streamed(before + text + after, sizes)
            leaked = [secret[i : i + 6] for i in range(len(secret) - 5)]
            assert not any(piece in shown for piece in leaked), shown
            assert shown.startswith(before.split(" ")[0])


def test_ordinary_words_are_not_held_and_nothing_is_lost() -> None:
    chunks = SafeChunks()
    assert [chunks.feed(w) for w in ["Hello", " world", ", the", " answer"]] == [
        "Hello",
        " world",
        ", the",
        " answer",
    ]
    assert chunks.feed(" is s") == " is "  # "s" may be the start of "sk-…"
    assert chunks.feed("ure.") == "sure."
    text = "Bearer abc " * 50 + "-----BEGIN PRIVATE KEY----- unterminated " * 600
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    held = SafeChunks()
    assert "".join(held.feed(p) for p in pieces) + held.flush() == text
