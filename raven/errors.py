"""The root of Raven's error tree. Each package derives its own few errors from it.

RavenError
├── config.ConfigError        bad or missing configuration (exit code 2)
├── providers.ProviderError   a model call failed (auth, not found, transport, protocol)
├── sessions.SessionNotFound  no session with that id
└── tools.ToolError           a tool refused or failed; goes back to the model
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError


class RavenError(Exception):
    """A failure Raven can explain to a person in one message."""

    exit_code: int = 1


def invalid_fields(exc: ValidationError, whole: str) -> str:
    """A validation error as "where: what" for each problem, joined by "; " (`whole` names
    the object itself when the problem is not in one field): the one wording every face
    uses for bad params and the model reads for bad tool arguments."""
    return "; ".join(
        f"{'.'.join(str(part) for part in e['loc']) or whole}: {e['msg']}" for e in exc.errors()
    )
