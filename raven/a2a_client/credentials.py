"""Credentials pinned to one origin: added to a request only when it goes there."""

from __future__ import annotations

from collections.abc import Generator, Sequence

import httpx

from raven.config import A2APeer
from raven.origins import Origin, origin_of, parse_origin


class OriginScopedBearer(httpx.Auth):
    """`Authorization: Bearer …` for requests to `origin`; nothing for any other."""

    def __init__(self, origin: Origin, credential: str) -> None:
        self._origin = origin
        self._credential = credential

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        if origin_of(str(request.url)) == self._origin:
            request.headers["Authorization"] = f"Bearer {self._credential}"
        yield request


def credential_for(peers: Sequence[A2APeer], origin: Origin) -> A2APeer | None:
    """The peer entry for `origin`; the list is a credential map, not a firewall."""
    return next((p for p in peers if parse_origin(p.origin) == origin), None)
