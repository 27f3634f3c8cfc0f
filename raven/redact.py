"""Redaction of recognised credentials in text that leaves Raven for a person or a peer.

`redact` masks one text (`raven.safe_chunks` re-cuts streamed text so that a
credential streamed in pieces reaches it whole). Pure string work; never logs
what it finds.
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


CLEAN_CHARS = 64
"""Strings this short that hold no credential are remembered (`_clean`): the same field
names, ids and words pass through every event a face sends."""
_CLEAN_MAX = 8192
_clean: set[str] = set()


_INERT = "0123456789abcdef."
"""Characters no credential `redact` knows can be made of alone (hex, digits, dots;
tests/test_redact.py holds the needles to it): a log cursor, a version, a number pass at
once, and are not remembered (each is new)."""


def redact(text: str) -> str:
    """`text` with every recognised credential replaced by `[REDACTED]`."""
    if text in _clean or not text.strip(_INERT):
        return text
    shown = _redact(text)
    if shown is text and len(text) <= CLEAN_CHARS and len(_clean) < _CLEAN_MAX:
        _clean.add(text)  # never one that held a credential
    return shown


def _redact(text: str) -> str:
    lowered = text.lower()
    tried = -1
    for needle, ignore_case, i in _NEEDLES:
        if i != tried and needle in (lowered if ignore_case else text):
            tried = i
            _, pattern, replacement = _PATTERNS[i]
            text = pattern.sub(replacement, text)
    return text


def redact_json(value: Any) -> Any:
    """A copy of a JSON value with `redact` applied to every string in it, an object's keys
    included (a model can put a credential in a key as well as in a value); keys that
    become the same are told apart (`[REDACTED]`, `[REDACTED] (2)`)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        copy: dict[Any, Any] = {}
        clean = _clean  # a face sends this for every event: what is known clean at once
        for key, item in value.items():
            shown = key if key in clean or not isinstance(key, str) else redact(key)
            if shown != key:
                base, n = shown, 1
                while shown in copy or shown in value:
                    n += 1
                    shown = f"{base} ({n})"
            kind = type(item)
            if kind is str:
                copy[shown] = item if item in clean else redact(item)
            else:
                copy[shown] = item if kind in _PLAIN else redact_json(item)
        return copy
    if isinstance(value, list):
        return [redact_json(v) for v in value]
    return value


_PLAIN = frozenset((int, float, bool, type(None)))
