"""Where A2A tasks live: in memory (the default), or in a database other processes share.

The memory store is the SDK's, keeping the newest `keepFinishedTasks` finished tasks: a
gateway that runs for months must not grow with every task it ever served (running and
waiting tasks are always kept). A database (`sqlite`, a file in the data directory, or
an SQLAlchemy async URL such as PostgreSQL) is the SDK's versioned store: every write
names the version it is based on and a stale one is refused, so a replica's late write
can never change a task another one finished. Its events are kept beside it, for
subscribers on other replicas, and so are the leases (`raven.a2a.leases`) and the push
configs. Never runs a task.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task, TaskState

from raven.config import A2AServerConfig, ConfigError
from raven.config.paths import Paths
from raven.errors import RavenError

if TYPE_CHECKING:
    from a2a.server.cluster import DatabaseTaskEventStream, VersionedDatabaseTaskStore
    from a2a.server.tasks import DatabasePushNotificationConfigStore
    from sqlalchemy.ext.asyncio import AsyncEngine

    from raven.a2a.leases import Leases

TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
    }
)
SETTLED = TERMINAL | {TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED}
"""States in which nothing more happens until a follow-up (or ever)."""
RUNNING = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
EVENT_POLL_S = 0.25
"""How often a replica looks for the events of a task another one runs."""


def unreachable(exc: BaseException) -> bool:
    """Whether `exc` says a shared task store was out of reach or lost its connection (a
    database restart), which passes, rather than a fault of Raven's or of the data."""
    if isinstance(exc, OSError):
        return True
    from sqlalchemy import exc as sql

    return isinstance(exc, sql.DBAPIError) and (
        exc.connection_invalidated
        or isinstance(exc, sql.OperationalError | sql.InterfaceError | sql.InternalError)
    )


class StoreOutage:
    """Says once that a shared task store is out of reach, with the error on one line, and
    once that it is back: not a traceback at every try while a database restarts."""

    def __init__(self, log: logging.Logger, what: str) -> None:
        self._log, self._what, self.down = log, what, False

    def failed(self, exc: BaseException) -> None:
        if not unreachable(exc):
            self._log.error("%s failed", self._what, exc_info=exc)
        elif not self.down:
            self.down = True
            self._log.warning("%s: the task store cannot be reached (%s)", self._what, exc)

    def worked(self) -> None:
        if self.down:
            self.down = False
            self._log.warning("%s: the task store can be reached again", self._what)


class BoundedMemoryTaskStore(TaskStore):
    def __init__(self, keep: int) -> None:
        self._tasks = InMemoryTaskStore(use_copying=True)  # `get` gives a copy to change
        self._keep = keep
        self._finished: OrderedDict[str, User] = OrderedDict()
        """Finished tasks, oldest first, with their owner (not the whole call context, which
        holds the request's headers)."""

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await self._tasks.save(task, context)
        if task.status.state not in TERMINAL:
            return
        self._finished[task.id] = context.user
        self._finished.move_to_end(task.id)
        while len(self._finished) > self._keep:
            task_id, owner = self._finished.popitem(last=False)
            await self._tasks.delete(task_id, ServerCallContext(user=owner))

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        return await self._tasks.get(task_id, context)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        return await self._tasks.list(params, context)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        self._finished.pop(task_id, None)
        await self._tasks.delete(task_id, context)


class TaskStoreDamaged(RavenError):
    """The A2A task store's SQLite file is not whole."""


def _damaged(database: str | None, said: object) -> str:
    return (
        f"cannot open the A2A task store {database}: it is damaged ({said}); move it aside "
        "to start a new one (its tasks are lost), or put back a copy"
    )


@dataclass
class Shared:
    """A database store: versioned tasks, their events and leases, shared by replicas."""

    tasks: VersionedDatabaseTaskStore
    events: DatabaseTaskEventStream
    leases: Leases
    push_configs: DatabasePushNotificationConfigStore
    engine: AsyncEngine

    async def initialize(self) -> None:
        """The tables, and, in an SQLite file, a check that the file is whole: a damaged
        one is refused now, saying so, rather than failing task by task."""
        from sqlalchemy import text
        from sqlalchemy.exc import DBAPIError

        database = self.engine.url.database
        try:
            if self.engine.url.get_backend_name() == "sqlite":
                async with self.engine.connect() as conn:
                    said = (await conn.execute(text("PRAGMA quick_check"))).scalar()
                if said != "ok":
                    raise TaskStoreDamaged(_damaged(database, said))
            await self.tasks.initialize()
            await self.events.initialize()
            await self.leases.initialize()
            await self.push_configs.initialize()
        except DBAPIError as exc:
            if self.engine.url.get_backend_name() == "sqlite":
                raise TaskStoreDamaged(_damaged(database, exc.orig)) from None
            raise

    async def running(self) -> list[tuple[str, str]]:
        """(id, owner) of every task stored as submitted or working."""
        from sqlalchemy import select

        db = self.tasks.as_task_store
        model = db.task_model  # type: ignore[attr-defined]
        states = [TaskState.Name(s) for s in RUNNING]
        async with db.async_session_maker() as session:  # type: ignore[attr-defined]
            rows = await session.execute(
                select(model.id, model.owner).where(model.status["state"].as_string().in_(states))
            )
            return [(task_id, owner) for task_id, owner in rows.all()]

    async def aclose(self) -> None:
        await self.engine.dispose()


def open_store(settings: A2AServerConfig, paths: Paths) -> BoundedMemoryTaskStore | Shared:
    """`memory`, `sqlite` (a file in the data directory) or an SQLAlchemy async URL."""
    kind = settings.task_store
    if kind == "memory":
        return BoundedMemoryTaskStore(settings.keep_finished_tasks)
    try:
        from a2a.server.cluster import DatabaseTaskEventStream, VersionedDatabaseTaskStore
        from a2a.server.tasks import DatabasePushNotificationConfigStore
        from sqlalchemy.ext.asyncio import create_async_engine

        from raven.a2a.leases import Leases
    except ImportError as exc:
        raise ConfigError(f"a2a.server.taskStore {kind!r} needs SQLAlchemy: {exc}") from exc
    if kind == "sqlite":
        from raven.private_files import private_file

        url = f"sqlite+aiosqlite:///{private_file(paths.data_dir / 'a2a-tasks.db')}"
    else:
        url = kind
    try:
        # A connection the server dropped (a restart) is found out and replaced when taken
        # from the pool, not by the request that uses it.
        engine = create_async_engine(url, pool_pre_ping=kind != "sqlite")
    except Exception as exc:
        raise ConfigError(f"a2a.server.taskStore: cannot use {kind!r}: {exc}") from exc
    return Shared(
        VersionedDatabaseTaskStore(engine, create_table=True),
        DatabaseTaskEventStream(engine, create_table=True, poll_interval_s=EVENT_POLL_S),
        Leases(engine, settings.lease_s),
        DatabasePushNotificationConfigStore(engine, create_table=True),
        engine,
    )
