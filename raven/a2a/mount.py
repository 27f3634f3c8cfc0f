"""Assembling the A2A face: task store, executor and the SDK's request handler.

One `A2AMount` serves both hostings (standalone and the gateway). Refuses to
exist inside a sub-agent process.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from a2a.server.agent_execution import SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.tasks import TaskStore
from a2a.types import AgentCard, Message, Part, Role, SendMessageRequest

from raven.a2a.card import agent_card, extended_card
from raven.a2a.direct import DirectTasks
from raven.a2a.executor import NO_ANSWER, LocalAsker, RavenExecutor
from raven.a2a.memory_store import BoundedMemoryTaskStore
from raven.a2a.parts import input_modes
from raven.config import A2AServerConfig, ConfigError, is_subagent
from raven.engine import Runtime
from raven.errors import RavenError

log = logging.getLogger(__name__)

RELEASE_MARGIN_S = 60.0


class SubagentRefused(RavenError):
    """A2A hosting inside a sub-agent process, which must never listen for peers."""

    def __init__(self) -> None:
        super().__init__(
            "refusing to serve A2A inside a sub-agent process (RAVEN_SUBAGENT=1): "
            "a sub-agent must not accept work from remote peers"
        )


@dataclass
class A2AMount:
    settings: A2AServerConfig
    handler: DefaultRequestHandler
    executor: RavenExecutor
    task_store: TaskStore
    roster: list[dict[str, Any]]
    direct: DirectTasks
    """The tasks this server starts, served without the SDK's handler (`raven.a2a.direct`)."""

    def card(self, rpc_url: str) -> AgentCard:
        return agent_card(rpc_url, self.roster, input_modes(self.settings))

    async def start(self) -> None:
        """Before serving: tasks a stopped Raven left running in a lasting store end failed."""
        from raven.a2a.runners import StampedTaskStore

        if isinstance(self.task_store, StampedTaskStore):
            await self.task_store.fail_orphans()

    async def aclose(self) -> None:
        await self.executor.aclose()
        await self.direct.aclose()
        await self.handler.aclose()
        engine = getattr(self.task_store, "engine", None)
        if engine is not None:
            await engine.dispose()


def build_mount(
    runtime: Runtime,
    settings: A2AServerConfig,
    env: Mapping[str, str] = os.environ,
    local: LocalAsker | None = None,
) -> A2AMount:
    """The A2A face over `runtime`; raises `SubagentRefused` or `ConfigError`. `local` lets
    people at hand (the gateway's UIs) answer a task's questions before the peer is asked
    (they watch the tasks' turns in the sessions' logs)."""
    if is_subagent(env):
        raise SubagentRefused()
    if not settings.token:
        raise ConfigError("a2a.server.token is empty; run `raven a2a enable` to mint one")
    workdir = runtime.paths.data_dir / "a2a-work"
    if settings.cwd:
        workdir = runtime.paths.config_dir / settings.cwd
    roster = runtime.config.roster()
    store = task_store(settings, runtime)
    executor = RavenExecutor(runtime, settings, workdir, local)
    public = agent_card("http://localhost" + settings.path, roster, input_modes(settings))

    async def advertised(card: AgentCard, ctx: ServerCallContext) -> AgentCard:
        # The extended card names the same URL as the public card served to this caller.
        url = ctx.state.get("rpc_url") or card.supported_interfaces[0].url
        return extended_card(agent_card(url, roster, input_modes(settings)), roster)

    builder = SimpleRequestContextBuilder(context_id_generator=executor.context_ids)
    direct = DirectTasks(executor, store, builder)
    handler = DefaultRequestHandler(
        agent_executor=executor,
        task_store=store,
        agent_card=public,
        request_context_builder=builder,
        extended_agent_card=extended_card(public, roster) if roster else None,
        extended_card_modifier=advertised,
        interrupted_task_timeout=settings.input_timeout_s + RELEASE_MARGIN_S,
    )

    async def answer_timed_out(task_id: str, context_id: str, ctx: ServerCallContext) -> None:
        message = Message(
            message_id=uuid.uuid4().hex,
            role=Role.ROLE_USER,
            task_id=task_id,
            context_id=context_id,
            parts=[Part(text=NO_ANSWER)],
        )
        request = SendMessageRequest(message=message)
        try:
            if direct.has(task_id):
                await direct.send(request, ctx)
            else:
                await handler.on_message_send(request, ctx)
        except Exception:
            log.exception("A2A task %s: could not resume after the question timed out", task_id)

    executor.on_question_timeout = answer_timed_out
    return A2AMount(settings, handler, executor, store, roster, direct)


def task_store(settings: A2AServerConfig, runtime: Runtime) -> TaskStore:
    """`memory`, `sqlite` (a file in the data directory) or an SQLAlchemy async URL."""
    kind = settings.task_store
    if kind == "memory":
        return BoundedMemoryTaskStore(settings.keep_finished_tasks)
    try:
        from sqlalchemy.ext.asyncio import create_async_engine

        from raven.a2a.runners import StampedTaskStore
    except ImportError as exc:
        raise ConfigError(f"a2a.server.taskStore {kind!r} needs SQLAlchemy: {exc}") from exc
    if kind == "sqlite":
        from raven.private_files import private_file

        url = f"sqlite+aiosqlite:///{private_file(runtime.paths.data_dir / 'a2a-tasks.db')}"
    else:
        url = kind
    try:
        engine = create_async_engine(url)
    except Exception as exc:
        raise ConfigError(f"a2a.server.taskStore: cannot use {kind!r}: {exc}") from exc
    return StampedTaskStore(engine, create_table=True)
