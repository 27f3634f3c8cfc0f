"""Web origins as (scheme, host, port), for deciding where a credential may go. Pure."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

Origin = tuple[str, str, int]
_DEFAULT_PORTS = {"http": 80, "https": 443}


class BadOrigin(ValueError):
    """Not an http(s) URL with a host."""


def origin_of(url: str) -> Origin:
    """The origin of `url`: scheme and host lower-cased, the default port filled in."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise BadOrigin(f"{url!r} is not a valid URL: {exc}") from exc
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise BadOrigin(f"{url!r} must start with http:// or https://")
    if not parts.hostname:
        raise BadOrigin(f"{url!r} has no host")
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def parse_origin(value: str) -> Origin:
    """An origin written alone (`https://host[:port]`): no path, query, user or fragment."""
    origin = origin_of(value)
    parts = urlsplit(value.strip())
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise BadOrigin(f"{value!r} is not an origin: give only scheme://host[:port]")
    return origin


def show(origin: Origin) -> str:
    scheme, host, port = origin
    return f"{scheme}://{host}" + ("" if _DEFAULT_PORTS[scheme] == port else f":{port}")


def is_loopback(host: str) -> bool:
    """True for `localhost` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
