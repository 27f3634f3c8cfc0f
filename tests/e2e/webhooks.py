"""Webhook receivers on loopback for the push notification tests."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web

from tests.ports import free_port


@dataclass
class Hit:
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)

    def signed_with(self, token: str) -> bool:
        """The Standard Webhooks signature, checked as a receiver checks it."""
        signed = f"{self.headers['webhook-id']}.{self.headers['webhook-timestamp']}.".encode()
        digest = hmac.new(token.encode(), signed + self.body, hashlib.sha256).digest()
        version, signature = self.headers["webhook-signature"].split(",", 1)
        return version == "v1" and hmac.compare_digest(signature, base64.b64encode(digest).decode())


@dataclass
class Receiver:
    """Webhooks on loopback: `/ok` takes everything, `/flaky` fails three times first,
    `/silent` never answers, `/redirect` points elsewhere (`/elsewhere`)."""

    port: int = 0
    hits: list[Hit] = field(default_factory=list)
    arrived: asyncio.Condition = field(default_factory=asyncio.Condition)
    flaky_left: int = 3
    stop_silent: asyncio.Event = field(default_factory=asyncio.Event)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def handle(self, request: web.Request) -> web.StreamResponse:
        hit = Hit(request.path, dict(request.headers), await request.read())
        async with self.arrived:
            self.hits.append(hit)
            self.arrived.notify_all()
        if request.path == "/flaky" and self.flaky_left > 0:
            self.flaky_left -= 1
            return web.Response(status=503)
        if request.path == "/silent":
            await self.stop_silent.wait()
        if request.path == "/redirect":
            raise web.HTTPTemporaryRedirect(self.url("/elsewhere"))
        return web.Response(text="thanks")

    def at(self, path: str) -> list[Hit]:
        return [hit for hit in self.hits if hit.path == path]

    async def until(self, path: str, done: Any, timeout: float = 15) -> list[Hit]:
        """The hits on `path` once `done(hits)` holds."""
        async with asyncio.timeout(timeout), self.arrived:
            await self.arrived.wait_for(lambda: done(self.at(path)))
        return self.at(path)


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    hooks = Receiver(port=free_port())
    app = web.Application()
    app.router.add_route("POST", "/{name}", hooks.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", hooks.port).start()
    yield hooks
    hooks.stop_silent.set()
    await runner.cleanup()


def pushed_states(hits: list[Hit]) -> list[str]:
    """The task states the notifications told, in order (a StreamResponse each)."""
    told = []
    for hit in hits:
        body = hit.json
        (kind,) = body.keys()  # exactly one of task, message, statusUpdate, artifactUpdate
        if kind in ("task", "statusUpdate"):
            told.append((body[kind]["status"])["state"].removeprefix("TASK_STATE_"))
    return told
