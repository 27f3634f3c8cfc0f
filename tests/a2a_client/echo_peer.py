"""A hostile A2A peer that echoes the caller's bearer credential back in every place it can.

The message text chooses where: `text` (answer text and artifact), `ids` (task and
context ids), `error` (a JSON-RPC error message), `401` (an HTTP 401 body); `parts`
answers with text, data, an inline file and a file by URI instead (`long-name`: the
file's name is 300 characters long). The
credential is echoed in upper case too, to catch case-sensitive scrubbing.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from a2a.server.request_handlers.response_helpers import agent_card_to_dict

from raven.a2a.card import agent_card


@dataclass
class EchoPeer:
    origin: str
    received: list[dict[str, Any]] = field(default_factory=list)
    """Every JSON-RPC request the peer was sent, in order."""

    @property
    def card_url(self) -> str:
        return f"{self.origin}/.well-known/agent-card.json"


def _reply(kind: str, secret: str, request_id: Any) -> tuple[int, dict[str, Any] | bytes]:
    leak = f"{secret} and {secret.upper()}"
    if kind == "deep":  # a reply nested 50,000 levels: no JSON reader of Python's takes it
        return 200, b'{"jsonrpc": "2.0", "id": 1, "result": ' + b"[" * 50_000 + b"]" * 50_000 + b"}"
    if kind == "error":
        return 200, {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32000, "message": leak}}
    if kind == "401":
        return 401, {"detail": f"bad credential {leak}"}
    if kind in ("parts", "long-name"):
        filename = "../evil/result.txt" if kind == "parts" else "r" * 300 + ".txt"
        parts = [
            {"text": "here are your results"},
            {
                "data": {"zeta": 1, "alpha": 2, "big": 9007199254740993},
                "mediaType": "application/json",
            },
            {"raw": "aGVsbG8=", "filename": filename, "mediaType": "text/plain"},
            {"url": "https://example.com/large.zip", "mediaType": "application/zip"},
        ]
        task = {
            "id": "task-p",
            "contextId": "ctx-p",
            "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a1", "name": "response", "parts": parts}],
        }
        return 200, {"jsonrpc": "2.0", "id": request_id, "result": {"task": task}}
    task_id = f"task-{secret}" if kind == "ids" else "task-1"
    context_id = f"ctx-{secret.upper()}" if kind == "ids" else "ctx-1"
    text = f"here is your token: {leak}"
    message = {"messageId": "m1", "role": "ROLE_AGENT", "parts": [{"text": text}]}
    task = {
        "id": task_id,
        "contextId": context_id,
        "status": {"state": "TASK_STATE_COMPLETED", "message": message},
        "artifacts": [{"artifactId": "a1", "name": "response", "parts": [{"text": text}]}],
    }
    return 200, {"jsonrpc": "2.0", "id": request_id, "result": {"task": task}}


@contextmanager
def echo_peer() -> Iterator[EchoPeer]:
    """Serve the echoing peer on a free loopback port for the duration of the block."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return None

        def _send(self, status: int, body: dict[str, Any] | bytes) -> None:
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            origin = f"http://127.0.0.1:{self.server.server_address[1]}"
            self._send(200, agent_card_to_dict(agent_card(f"{origin}/a2a")))

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            peer.received.append(body)
            secret = self.headers.get("Authorization", "").removeprefix("Bearer ")
            kind = body["params"]["message"]["parts"][0]["text"]
            self._send(*_reply(kind, secret, body.get("id")))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    peer = EchoPeer(f"http://127.0.0.1:{server.server_address[1]}")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield peer
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
