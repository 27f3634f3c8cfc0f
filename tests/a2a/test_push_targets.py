"""Where push notifications may go (`raven.a2a.push_targets`)."""

from __future__ import annotations

import ipaddress

import pytest

from raven.a2a.push_targets import GuardedResolver, PushRefused, PushTargets


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.0.0.8",
        "172.16.3.4",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "::1",
        "fe80::1",
        "fc00::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        # IPv6 carrying an IPv4 address: NAT64, local NAT64, 6to4, IPv4-compatible, Teredo
        "64:ff9b::7f00:1",
        "64:ff9b::a9fe:a9fe",  # 169.254.169.254, the cloud metadata service
        "64:ff9b:1::7f00:1",
        "64:ff9b:1:abcd::a00:1",
        "2002:7f00:1::",
        "2002:a9fe:a9fe::1",
        "::7f00:1",
        "::127.0.0.1",
        "::a9fe:a9fe",
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
    ],
)
def test_addresses_that_are_not_public_are_refused(address: str) -> None:
    targets = PushTargets([])
    assert not targets.allowed("h", ipaddress.ip_address(address))
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(PushRefused, match="allowPrivate"):
        targets.check_url(f"http://{host}/hook")


def test_public_addresses_pass_and_the_allow_list_opens_hosts_and_networks() -> None:
    assert PushTargets([]).allowed("h", ipaddress.ip_address("93.184.215.14"))
    targets = PushTargets(["10.0.0.0/8", "hooks.lan", "127.0.0.1"])
    assert targets.allowed("x", ipaddress.ip_address("10.9.8.7"))
    assert targets.allowed("x", ipaddress.ip_address("::ffff:10.9.8.7"))
    assert targets.allowed("x", ipaddress.ip_address("64:ff9b::a09:807"))  # NAT64 10.9.8.7
    # An IPv6 address carrying a public IPv4 one reaches that public address.
    assert PushTargets([]).allowed("h", ipaddress.ip_address("64:ff9b::5db8:d70e"))
    assert PushTargets([]).allowed("h", ipaddress.ip_address("2002:5db8:d70e::1"))
    assert targets.allowed("hooks.lan", ipaddress.ip_address("192.168.0.2"))
    assert not targets.allowed("other.lan", ipaddress.ip_address("192.168.0.2"))
    assert targets.check_url("http://127.0.0.1:9/x") == ("127.0.0.1", 9)
    assert targets.check_url("https://hooks.lan/x") == ("hooks.lan", 443)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("ftp://example.com/x", "http or https"),
        ("file:///etc/passwd", "http or https"),
        ("http:///nohost", "no host"),
        ("https://user:pw@example.com/x", "credentials"),
        ("http://example.com:99999/x", "not a valid URL"),
    ],
)
def test_urls_raven_will_not_send_to_say_why(url: str, why: str) -> None:
    with pytest.raises(PushRefused, match=why):
        PushTargets([]).check_url(url)


async def test_names_are_judged_by_what_they_resolve_to_on_every_connection() -> None:
    with pytest.raises(PushRefused, match="not a public address"):
        await PushTargets([]).check("http://localhost:8080/hook")
    resolver = GuardedResolver(PushTargets([]))
    try:
        with pytest.raises(OSError, match="not a public address"):
            await resolver.resolve("localhost", 8080)
    finally:
        await resolver.close()
    allowed = GuardedResolver(PushTargets(["localhost"]))
    try:
        found = await allowed.resolve("localhost", 8080)
        assert found and all(ipaddress.ip_address(r["host"]).is_loopback for r in found)
    finally:
        await allowed.close()
