"""Where push notifications may go: the guard against a peer using Raven to reach
addresses it cannot (SSRF).

A webhook URL must be `http` or `https`, and its host must be a public address, or
resolve only to public ones, unless the operator allow-lists it (`a2a.server.push.
allowPrivate`: host names, or networks such as `10.0.0.0/8`). Loopback, private,
link-local (cloud metadata at 169.254.169.254), shared, reserved, multicast and
unspecified addresses are refused; an IPv6 address that carries an IPv4 one (mapped,
compatible, NAT64, 6to4, Teredo) is judged as the IPv4 it carries.

The rule is checked twice: when a config is created (a clear error for a URL that is
plainly refused), and on every connection, by the resolver the delivery's connector
uses (`GuardedResolver`), so a name that resolved to a public address then and to a
private one now (DNS rebinding) is still refused. Never sends anything.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

log = logging.getLogger(__name__)

RESOLVE_S = 2.0
"""How long a config's creation waits to resolve its host (a host that does not resolve
then is checked again on delivery)."""

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class PushRefused(ValueError):
    """A webhook URL Raven will not send to; the message says why."""


class PushTargets:
    def __init__(self, allow_private: list[str]) -> None:
        self._hosts: set[str] = set()
        self._networks: list[Network] = []
        for entry in allow_private:
            try:
                self._networks.append(ipaddress.ip_network(entry, strict=False))
            except ValueError:
                self._hosts.add(entry.lower().rstrip("."))

    def check_url(self, url: str) -> tuple[str, int]:
        """The URL's host and port; raises PushRefused for a bad scheme or a host that is
        a refused address (names are left to `check_resolved`)."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise PushRefused(f"the push URL is not a valid URL: {exc}") from None
        if parts.scheme not in ("http", "https"):
            raise PushRefused("the push URL must be http or https")
        host = (parts.hostname or "").rstrip(".")
        if not host:
            raise PushRefused("the push URL has no host")
        if parts.username or parts.password:
            raise PushRefused("the push URL must not carry credentials; use `authentication`")
        address = _address(host)
        if address is not None and not self.allowed(host, address):
            raise PushRefused(_refusal(host))
        return host, port or (443 if parts.scheme == "https" else 80)

    async def check(self, url: str) -> None:
        """`check_url`, then the addresses a name resolves to now; a name that does not
        resolve is let through (delivery checks it again, on connecting)."""
        host, port = self.check_url(url)
        if _address(host) is not None or host.lower() in self._hosts:
            return
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(RESOLVE_S):
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, TimeoutError):
            log.info("push: %s does not resolve now; it is checked again on delivery", host)
            return
        for *_, sockaddr in infos:
            address = _address(str(sockaddr[0]))
            if address is None or not self.allowed(host, address):
                raise PushRefused(_refusal(host))

    def allowed(self, host: str, address: Address) -> bool:
        if host.lower().rstrip(".") in self._hosts:
            return True
        if isinstance(address, ipaddress.IPv6Address) and (inner := _embedded(address)):
            address = inner
        if any(address in network for network in self._networks):
            return True
        return address.is_global and not address.is_multicast


_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def _embedded(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries to reach it, judged in its stead: IPv4-mapped
    (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d), NAT64 (64:ff9b::a.b.c.d and the local
    64:ff9b:1::/48), 6to4 (2002:aabb:ccdd::) and Teredo's client address."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]
    if address in _IPV4_COMPATIBLE and int(address) > 1:  # not :: nor ::1
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if any(address in network for network in _NAT64):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


class GuardedResolver(AbstractResolver):
    """The system resolver, keeping only the addresses `targets` allows."""

    def __init__(self, targets: PushTargets) -> None:
        self._targets = targets
        self._resolver = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = await self._resolver.resolve(host, port, family)
        kept = [
            result
            for result in found
            if (address := _address(result["host"])) is not None
            and self._targets.allowed(host, address)
        ]
        if not kept:
            raise OSError(_refusal(host))
        return kept

    async def close(self) -> None:
        await self._resolver.close()


def _address(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


def _refusal(host: str) -> str:
    return (
        f"push to {host} is refused: it is not a public address "
        "(the operator can allow it in a2a.server.push.allowPrivate)"
    )
