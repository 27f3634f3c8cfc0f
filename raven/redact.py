"""Redaction of recognised credentials in text that leaves Raven for a person or a peer.

`redact` masks one text; `SafeChunks` re-cuts streamed text so that no piece ends
inside something `redact` could recognise, so a credential a model streams in
sub-word deltas is masked wherever each piece is redacted. Pure string work;
never logs what it finds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

MASK = "[REDACTED]"

_Replacement = str | Callable[[re.Match[str]], str]

_PATTERNS: list[tuple[tuple[str, ...], re.Pattern[str], _Replacement]] = [
    # (what the text must hold for the pattern to be tried at all, lower-cased where the
    # pattern ignores case; the pattern; its replacement). Most text holds none of them.
    # PEM private key bodies
    (
        ("-----BEGIN",),
        re.compile(
            r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----)[\s\S]*?(-----END [A-Z0-9 ]*PRIVATE KEY-----)"
        ),
        rf"\1{MASK}\2",
    ),
    # Authorization headers and bearer tokens
    (
        ("authorization",),
        re.compile(r"(?i)\b(authorization\s*[:=]\s*)(?:(bearer|basic|token)\s+)?[^\s'\",;]+"),
        lambda m: f"{m.group(1)}{m.group(2) + ' ' if m.group(2) else ''}{MASK}",
    ),
    (("bearer",), re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), rf"\1{MASK}"),
    # vendor key shapes
    (("sk-",), re.compile(r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}"), MASK),
    (
        ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}"),
        MASK,
    ),
    (("glpat-",), re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), MASK),
    (("AKIA", "ASIA"), re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), MASK),
    (("xox",), re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), MASK),
    # JSON Web Tokens
    (
        ("eyJ",),
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
        MASK,
    ),
    # passwords in URLs: scheme://user:password@host (the scheme is not part of the
    # match: a text streamed in pieces may have it in an earlier piece)
    (("://",), re.compile(r"(://[^\s:/@]{1,256}:)[^\s@/]{1,256}(@)"), rf"\1{MASK}\2"),
    # labelled secrets: password=..., api_key: "...", token=...
    (
        ("pass", "secret", "key", "token"),
        re.compile(
            r"(?i)\b((?:pass(?:word|wd)?|secret|api[_-]?key|access[_-]?key|auth[_-]?token|token"
            r"|client[_-]?secret)[\"']?\s*[:=]\s*[\"']?)([^\s\"',;&]{4,})"
        ),
        rf"\1{MASK}",
    ),
]


_NEEDLES = [
    (needle, bool(pattern.flags & re.IGNORECASE), i)
    for i, (needles, pattern, _) in enumerate(_PATTERNS)
    for needle in needles
]


def redact(text: str) -> str:
    """`text` with every recognised credential replaced by `[REDACTED]`."""
    lowered = text.lower()
    tried = -1
    for needle, ignore_case, i in _NEEDLES:
        if i != tried and needle in (lowered if ignore_case else text):
            tried = i
            _, pattern, replacement = _PATTERNS[i]
            text = pattern.sub(replacement, text)
    return text


def redact_json(value: Any) -> Any:
    """A copy of a JSON value with `redact` applied to every string in it."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_json(v) for v in value]
    return value


_WORD_STARTS = (
    "sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "akia", "asia",
    "xox", "eyj", "bearer", "basic", "authorization", "pass", "secret", "api_key", "api-key",
    "apikey", "access_key", "access-key", "accesskey", "auth_token", "auth-token", "authtoken",
    "token", "client_secret", "client-secret", "clientsecret", "-----begin",
)  # fmt: skip
"""How every credential `redact` knows begins, lower-cased: a word that is (or may grow
into) one of these is held until it is whole."""
_LABEL_TAIL = re.compile(
    r"(?i)\b(?:authorization|bearer|basic|token|pass(?:word|wd)?|secret|api[_-]?key"
    r"|access[_-]?key|auth[_-]?token|client[_-]?secret)[\"']?\s*(?:[:=]\s*[\"']?\s*)?"
    r"(?:(?:bearer|basic|token)\s*)?$"
)
"""A label whose secret follows after a space ("Bearer ", "password = "): held with it."""
_KEY_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY-----")
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
    cut = end + _word_hold(word)
    label = _LABEL_TAIL.search(text, max(0, end - 64), end) if end else None
    if label is not None:  # "Bearer ", "password = ": what follows may still be growing
        cut = label.start()
    begin = text.rfind("-----BEGIN", 0, cut)
    if begin != -1 and not _KEY_END.search(text, begin, cut):
        cut = begin
    if cut == 0 and len(text) > MAX_HOLD_CHARS:
        return end or len(text)
    return cut


def _word_hold(word: str) -> int:
    """Where in a growing `word` holding must start; `len(word)` when none of it need wait."""
    lowered = word.lower()
    if "://" in lowered or lowered.endswith((":", ":/")):
        return 0
    starts = _STARTS_AT.search(lowered)
    grows = _GROWS_INTO.search(lowered, max(0, len(lowered) - _LONGEST_START))
    found = [m.start() for m in (starts, grows) if m is not None]
    return min(found) if found else len(word)


def _at_boundary(literal: str) -> str:
    """`literal` as a pattern that, like `redact`'s, starts at a word boundary if a word does."""
    escaped = re.escape(literal)
    return rf"(?<![a-z0-9_]){escaped}" if literal[0].isalnum() else escaped


_LONGEST_START = max(map(len, _WORD_STARTS))
_STARTS_AT = re.compile("|".join(_at_boundary(start) for start in _WORD_STARTS))
"""A credential's beginning, whole, anywhere in a word."""
_GROWS_INTO = re.compile(
    "(?:"
    + "|".join(
        sorted(
            {_at_boundary(start[:n]) for start in _WORD_STARTS for n in range(1, len(start))},
            key=len,
            reverse=True,
        )
    )
    + ")$"
)
"""The end of a word that a credential's beginning could grow from."""
