"""A real replica topology on loopback: `raven gateway` replicas (A2A mounted) sharing one
PostgreSQL database, behind HAProxy from Debian's packages.

HAProxy balances round robin, checks each replica's `/health`, names the replica that
answered in `X-Served-By`, and sends a request carrying `?replica=rN` to that replica
(so a test can put a UI on a given one, still through the balancer).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import RAVEN, write_config
from tests.e2e.a2a_server import TOKEN
from tests.ports import free_port
from tests.processes import program, wait_listening

DEADLINE_S = 30
LEASE_S = 2.0
GATEWAY_TOKEN = "replica-gateway-token-0123456789abcdefghijklmnopqrstuvwxyz"


def require_haproxy() -> str:
    found = program("haproxy")
    if found is None:
        missing = "no HAProxy: apt install haproxy to run the replica topology tests"
        if os.environ.get("RAVEN_TEST_STRICT"):
            pytest.fail(missing)
        pytest.skip(missing)
    return found


@dataclass
class Replica:
    name: str
    home: Path
    port: int
    proc: subprocess.Popen[str] | None = None

    def kill(self) -> None:
        """kill -9, as a crash or an OOM kill would."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.close_pipes()

    def stop(self) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.close_pipes()
        return self.proc.returncode

    def close_pipes(self) -> None:
        assert self.proc is not None
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


@dataclass
class Topology:
    url: str
    """The load balancer: where UIs and peers go."""
    replicas: list[Replica]
    workdir: Path
    balancer: subprocess.Popen[str] | None = None
    a2a: httpx.Client = field(init=False)

    def __post_init__(self) -> None:
        self.a2a = httpx.Client(
            base_url=self.url,
            headers={"Authorization": f"Bearer {TOKEN}", "A2A-Version": "1.0"},
            timeout=DEADLINE_S,
        )

    def call(
        self, method: str, params: dict[str, Any], replica: str | None = None
    ) -> tuple[dict[str, Any], str]:
        """An A2A JSON-RPC call through the balancer (to `replica`, if named): its result
        and the replica that answered."""
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        response = self.a2a.post("/a2a" + (f"?replica={replica}" if replica else ""), json=body)
        assert response.status_code == 200, response.text
        reply = response.json()
        assert "result" in reply, reply
        return reply["result"], response.headers["x-served-by"]

    def ws_url(self, replica: str | None = None) -> str:
        where = self.url.replace("http://", "ws://") + "/rpc"
        return where + (f"?replica={replica}" if replica else "")

    def replica(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name == name)

    def other(self, name: str) -> Replica:
        return next(r for r in self.replicas if r.name != name)


def configure(home: Path, pg_url: str, model_url: str, public: str, workdir: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    write_config(
        home,
        {
            "models": [
                {"id": "m", "provider": "openai", "baseUrl": model_url, "apiKeyEnv": "TEST_KEY"}
            ],
            "defaultModel": "m",
            "sessions": {"url": pg_url, "leaseS": LEASE_S},
            "gateway": {"publicUrl": public},
            "a2a": {
                "server": {
                    "enabled": True,
                    "token": TOKEN,
                    "taskStore": "sessions",
                    "approvals": "auto",
                    "cwd": str(workdir),
                }
            },
        },
    )
    token = home / "gateway.token"  # every replica knows the same token, as an operator sets it
    token.write_text(GATEWAY_TOKEN + "\n")
    token.chmod(0o600)


def start_replica(replica: Replica, env: dict[str, str]) -> None:
    replica.proc = subprocess.Popen(
        [*RAVEN, "gateway", "--port", str(replica.port)],
        env={**env, "RAVEN_HOME": str(replica.home), "TEST_KEY": "sk-test"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert replica.proc.stdout is not None
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        line = replica.proc.stdout.readline()
        if not line:
            break
        if line.startswith("login"):
            return
    stderr = replica.proc.stderr.read() if replica.proc.stderr else ""
    raise AssertionError(f"replica {replica.name} did not start: {stderr}")


def haproxy_config(port: int, replicas: list[Replica], check: str = "/health") -> str:
    """HAProxy in front of `replicas` on `port`, each checked with `GET check`."""
    servers = "\n".join(
        f"    server {r.name} 127.0.0.1:{r.port} check inter 300ms fall 2 rise 1" for r in replicas
    )
    chosen = "\n".join(
        f"    use-server {r.name} if {{ urlp(replica) -m str {r.name} }}" for r in replicas
    )
    return f"""
global
    maxconn 512

defaults
    mode http
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout tunnel 1h
    retries 2
    option redispatch

frontend raven
    bind 127.0.0.1:{port}
    default_backend replicas

backend replicas
    balance roundrobin
    option httpchk GET {check}
    http-response set-header X-Served-By %s
{chosen}
{servers}
"""


def wait_healthy(topology: Topology, names: set[str]) -> None:
    """Until the balancer has sent a request to each replica in `names` (its checks
    found them up)."""
    seen: set[str] = set()
    deadline = time.monotonic() + DEADLINE_S
    while not names <= seen and time.monotonic() < deadline:
        response = httpx.get(topology.url + "/health", timeout=5)
        if response.status_code == 200:
            seen.add(response.headers["x-served-by"])
    assert names <= seen, f"the balancer reaches only {seen}"


@contextmanager
def topology(
    env: dict[str, str], tmp_path: Path, pg_url: str, model_url: str, count: int = 2
) -> Iterator[Topology]:
    """`count` gateway replicas on one PostgreSQL database behind HAProxy."""
    haproxy = require_haproxy()
    port = free_port()
    public = f"http://127.0.0.1:{port}"
    workdir = tmp_path / "shared-work"  # the directory every replica's A2A sessions work in
    workdir.mkdir()
    replicas = [
        Replica(f"r{n}", tmp_path / f"replica{n}", free_port()) for n in range(1, count + 1)
    ]
    for replica in replicas:
        configure(replica.home, pg_url, model_url, public, workdir)
    # One replica migrates the database first; the others find it ready.
    start_replica(replicas[0], env)
    for replica in replicas[1:]:
        start_replica(replica, env)
    config = tmp_path / "haproxy.cfg"
    config.write_text(haproxy_config(port, replicas))
    balancer = subprocess.Popen(
        [haproxy, "-db", "-f", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    made = Topology(public, replicas, workdir, balancer)
    try:
        wait_listening(port)
        wait_healthy(made, {r.name for r in replicas})
        yield made
    finally:
        made.a2a.close()
        for replica in replicas:
            if replica.proc is not None and replica.proc.poll() is None:
                replica.stop()
            else:
                replica.close_pipes()
        balancer.terminate()
        balancer.wait(10)
        if balancer.stderr is not None:
            balancer.stderr.close()


def texts(task: dict[str, Any]) -> list[str]:
    return [p.get("text", "") for m in task.get("history", []) for p in m["parts"]]


def dump(value: Any) -> str:
    return json.dumps(value, indent=1)[:2000]
