"""`raven a2a serve` launched as an operator launches it, for tests."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.conftest import RAVEN, write_config
from tests.ports import free_port

TOKEN = "test-token-0123456789abcdefghijklmnopqrstuv"


@dataclass
class A2AServer:
    proc: subprocess.Popen[str]
    base: str
    rpc: str
    token: str

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()  # not left behind to trouble the tests that follow
            self.proc.wait(15)
            raise
        finally:
            assert self.proc.stdout is not None
            self.proc.stdout.close()
        return code

    def post(
        self,
        body: Any,
        token: str | None = "default",
        version: str | None = "1.0",
        raw: bytes | None = None,
    ) -> httpx.Response:
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {self.token if token == 'default' else token}"
        if version is not None:
            headers["A2A-Version"] = version
        content = raw if raw is not None else json.dumps(body).encode()
        return httpx.post(self.rpc, content=content, headers=headers, timeout=30)

    def call(self, method: str, params: dict[str, Any], request_id: Any = 1) -> dict[str, Any]:
        response = self.post(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        )
        assert response.status_code == 200, response.text
        return response.json()


def configure(home: Path, steps: list[dict[str, Any]] | None = None, **server: Any) -> None:
    (home / "script.json").write_text(json.dumps(steps or []))
    agents = server.pop("agents", [])
    if "agents_served" in server:  # the configured agents served beside Raven
        server["agents"] = server.pop("agents_served")
    write_config(
        home,
        {
            "models": [{"id": "s", "provider": "scripted", "script": "script.json"}],
            "a2a": {"server": {"token": TOKEN, **server}},
            "agents": agents,
        },
    )


def start(env: dict[str, str], *args: str) -> A2AServer:
    port = free_port()
    proc = subprocess.Popen(
        [*RAVEN, "a2a", "serve", "--port", str(port), *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    deadline = time.monotonic() + 30
    card = rpc = ""
    while time.monotonic() < deadline and not rpc:
        line = proc.stdout.readline()
        if not line:
            raise AssertionError(f"raven a2a serve exited with {proc.wait()}")
        if line.startswith("card:"):
            card = line.split()[1]
        elif line.startswith("rpc:"):
            rpc = line.split()[1]
    return A2AServer(proc, card.removesuffix("/.well-known/agent-card.json"), rpc, TOKEN)


def message(text: str, **ids: str) -> dict[str, Any]:
    return {
        "message": {
            "messageId": os.urandom(8).hex(),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
            **ids,
        }
    }
