"""Streamed text re-cut so that no credential straddles two pieces.

A model streams text in sub-word deltas; each face masks what it sends piece by
piece (`raven.redact`), so a key split across two pieces would get through.
`SafeChunks` holds back the end of the stream while it is, or may grow into,
something `redact` recognises, and lets ordinary words through at once. Never
changes, drops or reorders text: the pieces it returns join to what it was fed.
"""

from __future__ import annotations

import functools
import re
from typing import NamedTuple

_WORD_STARTS = (
    "sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "akia", "asia",
    "xox", "eyj", "bearer", "basic", "authorization", "pass", "secret", "api_key", "api-key",
    "apikey", "access_key", "access-key", "accesskey", "auth_token", "auth-token", "authtoken",
    "token", "client_secret", "client-secret", "clientsecret", "-----begin",
)  # fmt: skip
"""How every credential `redact` knows begins, lower-cased: a word that is (or may grow
into) one of these is held until it is whole."""
MAX_HOLD_CHARS = 16 * 1024
"""Past this much held text (a private key that never ends, one endless word) it goes out."""


class SafeChunks:
    """Cuts streamed text only where no credential can straddle the cut.

    `feed` takes a delta and returns what may be shown now (possibly ""); `flush`
    returns what is still held, at the end of the stream. Held: the last word while it
    is, or may become, a credential; a label and what follows it ("Bearer …"); an
    unfinished private key block. Ordinary words pass at once.
    """

    def __init__(self) -> None:
        self._held = ""

    def feed(self, delta: str) -> str:
        text = self._held + delta
        cut = _safe_cut(text)
        self._held = text[cut:]
        return text[:cut]

    def flush(self) -> str:
        text, self._held = self._held, ""
        return text


def _safe_cut(text: str) -> int:
    """How much of `text` may go out now."""
    end = len(text)
    while end and not text[end - 1].isspace():
        end -= 1  # `end` is past the last whitespace: text[end:] is the word still growing
    word = text[end:]
    cut = end + _word_hold(word) if word else end  # most deltas end a word
    patterns = _patterns()
    label = patterns.label_tail.search(text, max(0, end - 64), end) if end else None
    if label is not None:  # "Bearer ", "password = ": what follows may still be growing
        cut = label.start()
    begin = text.rfind("-----BEGIN", 0, cut)
    if begin != -1 and not patterns.key_end.search(text, begin, cut):
        cut = begin
    if cut == 0 and len(text) > MAX_HOLD_CHARS:
        return end or len(text)
    return cut


def _word_hold(word: str) -> int:
    """Where in a growing `word` holding must start; `len(word)` when none of it need wait."""
    lowered = word.lower()
    if "://" in lowered or lowered.endswith((":", ":/")):
        return 0
    patterns = _patterns()
    hold = _growing(lowered, patterns.prefixes)
    if any(start in lowered for start in _WORD_STARTS):  # the regular expression is slower
        starts = patterns.starts_at.search(lowered)
        if starts is not None:
            hold = min(hold, starts.start())
    return hold


def _growing(lowered: str, prefixes: frozenset[str]) -> int:
    """Where the end of `lowered` starts that a credential's beginning could grow from
    (`len(lowered)` when none): the longest such tail, at a word boundary if it begins
    with a letter or digit, as `redact` matches."""
    size = len(lowered)
    for at in range(max(0, size - _LONGEST_START + 1), size):
        tail = lowered[at:]
        if tail in prefixes and not (tail[0].isalnum() and at and _word_char(lowered[at - 1])):
            return at
    return size


def _word_char(char: str) -> bool:
    return char == "_" or ("a" <= char <= "z") or ("0" <= char <= "9")


def _at_boundary(literal: str) -> str:
    """`literal` as a pattern that, like `redact`'s, starts at a word boundary if a word does."""
    escaped = re.escape(literal)
    return rf"(?<![a-z0-9_]){escaped}" if literal[0].isalnum() else escaped


_LONGEST_START = max(map(len, _WORD_STARTS))


class _Patterns(NamedTuple):
    starts_at: re.Pattern[str]
    """A credential's beginning, whole, anywhere in a word."""
    prefixes: frozenset[str]
    """What a credential's beginning could grow from: each one cut short."""
    label_tail: re.Pattern[str]
    """A label whose secret follows after a space ("Bearer ", "password = ")."""
    key_end: re.Pattern[str]


@functools.cache
def _patterns() -> _Patterns:
    """Compiled on first use, not at import: `raven acp` starts without them."""
    return _Patterns(
        starts_at=re.compile("|".join(_at_boundary(start) for start in _WORD_STARTS)),
        prefixes=frozenset(start[:n] for start in _WORD_STARTS for n in range(1, len(start))),
        label_tail=re.compile(
            r"(?i)\b(?:authorization|bearer|basic|token|pass(?:word|wd)?|secret|api[_-]?key"
            r"|access[_-]?key|auth[_-]?token|client[_-]?secret)[\"']?\s*(?:[:=]\s*[\"']?\s*)?"
            r"(?:(?:bearer|basic|token)\s*)?$"
        ),
        key_end=re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY-----"),
    )
