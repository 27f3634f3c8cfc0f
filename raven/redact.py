"""Redaction of recognised credentials in text that leaves Raven for a person or a peer.

Pure string functions; never logs what it finds.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "[REDACTED]"

_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    # PEM private key bodies
    (
        re.compile(
            r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----)[\s\S]*?(-----END [A-Z0-9 ]*PRIVATE KEY-----)"
        ),
        rf"\1{MASK}\2",
    ),
    # Authorization headers and bearer tokens
    (
        re.compile(r"(?i)\b(authorization\s*[:=]\s*)(?:(bearer|basic|token)\s+)?[^\s'\",;]+"),
        lambda m: f"{m.group(1)}{m.group(2) + ' ' if m.group(2) else ''}{MASK}",
    ),  # type: ignore[list-item]
    (re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}"), rf"\1{MASK}"),
    # vendor key shapes
    (re.compile(r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_-]{16,}"), MASK),
    (re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}"), MASK),
    (re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}"), MASK),
    (re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"), MASK),
    (re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}"), MASK),
    # JSON Web Tokens
    (re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"), MASK),
    # passwords in URLs: scheme://user:password@host
    # (the scheme is bounded and starts at a word boundary: unbounded, a long run of
    # letters made this pattern quadratic)
    (
        re.compile(r"\b([a-zA-Z][a-zA-Z0-9+.-]{0,31}://[^\s:/@]{1,256}:)[^\s@/]{1,256}(@)"),
        rf"\1{MASK}\2",
    ),
    # labelled secrets: password=..., api_key: "...", token=...
    (
        re.compile(
            r"(?i)\b((?:pass(?:word|wd)?|secret|api[_-]?key|access[_-]?key|auth[_-]?token|token"
            r"|client[_-]?secret)[\"']?\s*[:=]\s*[\"']?)([^\s\"',;&]{4,})"
        ),
        rf"\1{MASK}",
    ),
]


def redact(text: str) -> str:
    """`text` with every recognised credential replaced by `[REDACTED]`."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)  # type: ignore[arg-type]
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
