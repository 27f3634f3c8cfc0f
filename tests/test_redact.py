from __future__ import annotations

import pytest

from raven.redact import _INERT, _NEEDLES, MASK, redact, redact_json

MUST = [
    ("curl -H 'Authorization: Bearer abcdef123456789'", "abcdef123456789"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
    ("export OPENAI_API_KEY=sk-proj-AbCdEfGhIjKlMnOpQrSt1234", "sk-proj-AbCdEfGhIjKlMnOpQrSt1234"),
    ("key sk-ant-api03-abcdefghijklmnopqrstuv", "sk-ant-api03-abcdefghijklmnopqrstuv"),
    ("token ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("GITLAB=glpat-abcdefghij1234567890", "glpat-abcdefghij1234567890"),
    ("aws AKIAIOSFODNN7EXAMPLE here", "AKIAIOSFODNN7EXAMPLE"),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    ("git clone https://alice:hunter2pass@github.com/x/y", "hunter2pass"),
    ("postgres://app:s3cretpw@db:5432/app", "s3cretpw"),
    ('{"password": "correct horse"}', "correct"),
    ("api_key=0123456789abcdef", "0123456789abcdef"),
    ("TOKEN: abcdEFGH1234", "abcdEFGH1234"),
    (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEA",
    ),
]

MUST_NOT = [
    "ls -la src/",
    "Read README.md (lines 1-40)",
    "the password field is optional",
    "https://github.com/owner/repo/pull/12",
    "sk-short",
    "task-manager and skills",
    "def tokenize(text): return text.split()",
    "Bearer",
]


@pytest.mark.parametrize("text, secret", MUST)
def test_recognised_credentials_are_redacted(text: str, secret: str) -> None:
    out = redact(text)
    assert secret not in out and MASK in out


@pytest.mark.parametrize("text", MUST_NOT)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact(text) == text


def test_redact_json_walks_nested_values() -> None:
    value = {"command": "echo sk-live-0123456789abcdefghij", "n": 3, "list": ["api_key=abcd1234"]}
    out = redact_json(value)
    assert out["n"] == 3 and MASK in out["command"] and MASK in out["list"][0]


def test_redact_json_masks_credentials_used_as_keys_and_keeps_them_apart() -> None:
    key = "sk-proj-AbCdEfGhIjKlMnOpQrSt1234"
    other = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
    value = {"path": "x", key: 1, other: 2, "nested": [{other: {key: "v"}}]}
    out = redact_json(value)
    shown = repr(out)
    assert key not in shown and other not in shown
    assert out["path"] == "x" and out[MASK] == 1 and out[f"{MASK} (2)"] == 2
    assert out["nested"] == [{MASK: {MASK: "v"}}]


def test_no_credential_is_made_of_the_characters_passed_at_once() -> None:
    """A string of hex digits and dots is never looked into (`_INERT`): that holds only
    while every pattern needs some other character before it is tried."""
    for needle, _, _ in _NEEDLES:
        assert needle.strip(_INERT) and needle.lower().strip(_INERT), needle
    assert redact("deadbeef.42") == "deadbeef.42"
