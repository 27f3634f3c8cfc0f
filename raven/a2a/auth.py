"""Bearer-token authentication for the A2A endpoint. Never logs or returns the token."""

from __future__ import annotations

import hmac

from a2a.auth.user import User

OPERATOR = "operator"


class Caller(User):
    """The authenticated caller; every task is owned by its name."""

    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


def authenticate(authorization: str | None, token: str, owner: str = OPERATOR) -> Caller | None:
    """The caller for an `Authorization` header, named `owner` (the agent it asks makes it
    one owner or another), or None. An empty token admits no one."""
    if not token or not authorization:
        return None
    scheme, _, presented = authorization.partition(" ")
    if scheme.lower() != "bearer" or not presented:
        return None
    if hmac.compare_digest(presented.strip().encode(), token.encode()):
        return Caller(owner)
    return None
