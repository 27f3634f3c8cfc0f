"""A remote A2A peer for tests, built on a2a-sdk's own Starlette routes and served by uvicorn.

It records, per request, whether a credential was presented. Its executor acts
on the message text: `ask` (input-required), `fail`, `slow`, `big`, `message`
(a bare Message reply); anything else is echoed.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from dataclasses import dataclass, field

import uvicorn
from a2a.helpers import new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import Task, TaskState, TaskStatus
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse
from starlette.routing import Route

from raven.a2a.card import agent_card


@dataclass
class Seen:
    path: str
    authorization: str | None


class PeerExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id and context.message
        text = context.get_user_input()
        if text == "message":
            await event_queue.enqueue_event(
                new_text_message("just a message", context_id=context.context_id)
            )
            return
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message],
                )
            )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        await updater.start_work()
        if context.current_task is not None:
            reply = f"Painted it {text}."
        elif text == "ask":
            await updater.requires_input(updater.new_agent_message([new_text_part("What colour?")]))
            return
        elif text == "fail":
            await updater.failed(updater.new_agent_message([new_text_part("disk full")]))
            return
        elif text == "slow":
            await asyncio.sleep(3)
            reply = "too late"
        elif text == "big":
            reply = "x" * (5 * 1024 * 1024)
        else:
            reply = f"peer says: {text}"
        await updater.add_artifact([new_text_part(reply)], name="answer")
        await updater.complete(updater.new_agent_message([new_text_part(reply)]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        return None


@dataclass
class Peer:
    port: int
    seen: list[Seen] = field(default_factory=list)
    server: uvicorn.Server | None = None
    thread: threading.Thread | None = None

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def card_url(self) -> str:
        return f"{self.origin}/.well-known/agent-card.json"

    def credentials_seen(self) -> list[str | None]:
        return [s.authorization for s in self.seen]


def start_peer(redirect_to: str | None = None, foreign_rpc: str | None = None) -> Peer:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    peer = Peer(port)
    card = agent_card(f"http://127.0.0.1:{port}/a2a")
    handler = DefaultRequestHandler(PeerExecutor(), InMemoryTaskStore(), card)

    async def redirect(request: Request) -> RedirectResponse:
        return RedirectResponse(redirect_to or "/", status_code=302)

    async def foreign(request: Request) -> JSONResponse:
        return JSONResponse(agent_card_to_dict(agent_card(foreign_rpc or "http://x/a2a")))

    async def grpc_only(request: Request) -> JSONResponse:
        body = agent_card_to_dict(card)
        body["supportedInterfaces"] = [
            {
                "url": f"http://127.0.0.1:{port}/grpc",
                "protocolBinding": "GRPC",
                "protocolVersion": "1.0",
            }
        ]
        return JSONResponse(body)

    app = Starlette(
        routes=[
            *create_agent_card_routes(card),
            *create_jsonrpc_routes(handler, "/a2a"),
            Route("/redirect-card", redirect),
            Route("/foreign-card", foreign),
            Route("/grpc-card", grpc_only),
        ]
    )

    async def recording(scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            auth = headers.get(b"authorization")
            peer.seen.append(Seen(scope["path"], auth.decode() if auth else None))
        await app(scope, receive, send)  # type: ignore[arg-type]

    config = uvicorn.Config(
        recording, host="127.0.0.1", port=port, log_level="error", access_log=False, lifespan="off"
    )
    peer.server = uvicorn.Server(config)
    peer.thread = threading.Thread(target=peer.server.run, daemon=True)
    peer.thread.start()
    deadline = time.monotonic() + 20
    while not peer.server.started:
        assert time.monotonic() < deadline, "the peer did not start"
        time.sleep(0.02)
    return peer


def stop_peer(peer: Peer) -> None:
    assert peer.server is not None and peer.thread is not None
    peer.server.should_exit = True
    peer.server.force_exit = True  # a `slow` request still running is cancelled, not awaited
    peer.thread.join(10)
    assert not peer.thread.is_alive(), "the peer did not stop"
