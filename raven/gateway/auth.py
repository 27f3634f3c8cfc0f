"""Who may use the gateway: the token (programs), one-time login links and cookies (browsers),
and the Host and Origin a request must carry (DNS rebinding, cross-site pages).

A cookie is a random nonce signed with the token, so a browser stays logged in across
gateway restarts and every cookie dies with the token. Tokens are compared in constant
time and never logged. Pure checks plus the token file; never touches a request body.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from pathlib import Path

COOKIE = "raven_gateway"
TOKEN_FILE = "gateway.token"
LOGIN_LINK_TTL_S = 600.0
"""A login link works once, and only this long after it was made (scrollback keeps links)."""


def load_or_mint_token(config_dir: Path, name: str = TOKEN_FILE) -> str:
    """The token kept in the 0600 file `name` in the config dir (the gateway's unless
    named), minted on first use."""
    from raven.config.store import write_private_file

    path = config_dir / name
    if path.exists():
        token = path.read_text(encoding="utf-8").strip()
        if token:
            return token
    token = secrets.token_urlsafe(32)
    write_private_file(path, token + "\n")
    return token


class Gatekeeper:
    """The token, the login links handed out, and the cookies signed with the token."""

    def __init__(
        self,
        token: str,
        allowed_hosts: set[str],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._token = token
        self._clock = clock
        self._links: dict[str, float] = {}
        self.allowed_hosts = {h.lower() for h in allowed_hosts}

    def new_login_code(self) -> str:
        """A code for one login link; spent on first use, void after `LOGIN_LINK_TTL_S`."""
        self._forget_expired()
        code = secrets.token_urlsafe(24)
        self._links[code] = self._clock() + LOGIN_LINK_TTL_S
        return code

    def spend_login_code(self, code: str) -> str | None:
        """The cookie value for a browser presenting `code`, once and in time; None for a bad,
        spent or expired code."""
        self._forget_expired()
        match = next((c for c in self._links if hmac.compare_digest(c, code)), None)
        if match is None:
            return None
        del self._links[match]
        nonce = secrets.token_urlsafe(24)
        return f"{nonce}.{self._sign(nonce)}"

    def _forget_expired(self) -> None:
        now = self._clock()
        for code in [c for c, deadline in self._links.items() if deadline <= now]:
            del self._links[code]

    def _sign(self, nonce: str) -> str:
        mac = hmac.new(self._token.encode(), b"raven-cookie:" + nonce.encode(), hashlib.sha256)
        return mac.hexdigest()

    def bearer(self, authorization: str | None) -> bool:
        """`Authorization: Bearer <the token>`."""
        if not authorization:
            return False
        scheme, _, value = authorization.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            value.strip().encode(), self._token.encode()
        )

    def authorized(self, authorization: str | None, cookie: str | None) -> bool:
        """A valid `Authorization: Bearer <token>` or a cookie a login link gave."""
        if self.bearer(authorization):
            return True
        nonce, _, signature = (cookie or "").partition(".")
        return bool(nonce) and hmac.compare_digest(signature.encode(), self._sign(nonce).encode())

    def trusted_host(self, host: str | None) -> bool:
        return host is not None and host.lower() in self.allowed_hosts

    def trusted_origin(self, origin: str | None) -> bool:
        """No Origin (a program), or the gateway's own address (its own page)."""
        if origin is None:
            return True
        scheme, _, rest = origin.partition("://")
        return scheme in ("http", "https") and rest.lower() in self.allowed_hosts
