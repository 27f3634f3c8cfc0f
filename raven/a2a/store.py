"""Where A2A tasks live: in memory (the default), or beside the sessions in their store.

The memory store is the SDK's, keeping the newest `keepFinishedTasks` finished tasks: a
gateway that runs for months must not grow with every task it ever served (running and
waiting tasks are always kept). `sessions` keeps them as rows of the session store
(`raven.sessions.tasks`: raven.db, or PostgreSQL with `sessions.url`), versioned: every
write names the version it is based on and a stale one is refused, so a replica's late
write can never change a task another one finished. Their events are kept beside them,
for subscribers on other replicas, and so are their push configs. Never runs a task.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from typing import cast

from a2a.auth.user import User
from a2a.server.cluster import (
    ConcurrentTaskModificationError,
    StoredTask,
    TaskVersion,
    VersionedTaskStore,
)
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.tasks import InMemoryTaskStore, PushNotificationConfigStore, TaskStore
from a2a.types import (
    ListTasksRequest,
    ListTasksResponse,
    StreamResponse,
    Task,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from a2a.utils.proto_utils import to_stream_response
from a2a.utils.task import ListTasksCursor, decode_list_tasks_cursor, encode_list_tasks_cursor

from raven.config import A2AServerConfig, ConfigError, SessionsConfig
from raven.engine import (
    SharedTaskRows,
    StoreUnavailable,
    TaskFilter,
    TaskRow,
    TaskRows,
    TaskStale,
)

log = logging.getLogger(__name__)

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
TERMINAL_NAMES = frozenset(TaskState.Name(s) for s in TERMINAL)
RUNNING_NAMES = frozenset(TaskState.Name(s) for s in RUNNING)
RUNS = "raven.runs"
"""In a call context's state: the session in whose turns this process runs the task (its
runner's writes say so)."""
AHEAD = "raven.ahead"
"""In a call context's state: the artifact updates a write applied before its event, stored
with it (`LiveTask.write(..., ahead=)`)."""


def unreachable(exc: BaseException) -> bool:
    """Whether `exc` says the task store was out of reach or lost its connection (a
    database restart), which passes, rather than a fault of Raven's or of the data."""
    return isinstance(exc, OSError | StoreUnavailable)


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


class RowsTaskStore(VersionedTaskStore):
    """The tasks as rows of the session store: each write compared and set on its version
    (a CANCELED one overwrites any version of a task that has not ended), with its event
    when other replicas may follow the task; a write under a context whose state names a
    session (`RUNS`) says this process runs the task in that session's turns."""

    def __init__(self, rows: TaskRows, shared: bool) -> None:
        self.rows = rows
        self._shared = shared
        self.pushed: set[str] = set()
        """Tasks that had push configs when last written here: their changes are
        delivered (`raven.a2a.push`), the others' cost nothing."""

    async def save(
        self,
        task: Task,
        *,
        event: Event | None,
        prev: Task | None,
        prev_version: TaskVersion,
        context: ServerCallContext,
    ) -> TaskVersion:
        del prev
        state = task.status.state
        stamp = task.status.timestamp.ToMicroseconds() if task.status.HasField("timestamp") else 0
        row = TaskRow(
            task.id,
            context.user.user_name,
            task.context_id,
            TaskState.Name(state),
            stamp,
            task.SerializeToString(),
        )
        told: list[bytes] = []
        if self._shared and event is not None:
            told = [_event_bytes(e) for e in (*context.state.get(AHEAD, ()), event)]
        cancel = state == TaskState.TASK_STATE_CANCELED
        try:
            saved = await self.rows.task_save(
                row,
                0 if prev_version.is_missing else version_number(prev_version),
                told,
                unless=TERMINAL_NAMES if cancel else None,
                final=state in TERMINAL,
                runner=context.state.get(RUNS),
            )
        except TaskStale:
            raise ConcurrentTaskModificationError(task.id) from None
        if saved.pushes:
            self.pushed.add(task.id)
        else:
            self.pushed.discard(task.id)
        return TaskVersion(saved.version)

    async def get(self, task_id: str, context: ServerCallContext) -> StoredTask | None:
        found = await self.rows.task_get(task_id, context.user.user_name)
        if found is None:
            return None
        row, version = found
        return StoredTask(Task.FromString(row.body), TaskVersion(version))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        """A keyset page: its cost does not grow with the number of tasks kept."""
        after = None
        if params.page_token:
            cursor = decode_list_tasks_cursor(params.page_token)
            if cursor is None or cursor.timestamp_ns is None:
                raise InvalidParamsError(message="pageToken is not one this server gave")
            after = (cursor.timestamp_ns // 1000, cursor.task_id)
        since = None
        if params.HasField("status_timestamp_after"):
            since = params.status_timestamp_after.ToMicroseconds()
        where = TaskFilter(
            context.user.user_name,
            params.context_id or None,
            TaskState.Name(params.status) if params.status else None,
            since,
            after,
        )
        size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
        page = await self.rows.task_page(where, size + 1)
        rows = page.rows[:size]
        token = ""
        if len(page.rows) > size:
            last = rows[-1]
            token = encode_list_tasks_cursor(ListTasksCursor(last.updated_us * 1000, last.id))
        return ListTasksResponse(
            tasks=[Task.FromString(r.body) for r in rows],
            next_page_token=token,
            page_size=size,
            total_size=page.total,
        )

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await self.rows.task_delete(task_id, context.user.user_name)

    async def events(self, task_id: str, after: TaskVersion) -> Sequence[tuple[TaskVersion, Event]]:
        """The events written with the task's versions after `after` (a shared store)."""
        rows = cast(SharedTaskRows, self.rows)
        found = await rows.task_events(task_id, 0 if after.is_missing else version_number(after))
        return [(TaskVersion(v), _event(body)) for v, body in found]


class RowsPushConfigs(PushNotificationConfigStore):
    """The push configs as rows beside their tasks."""

    def __init__(self, rows: TaskRows) -> None:
        self.rows = rows

    async def set_info(
        self,
        task_id: str,
        notification_config: TaskPushNotificationConfig,
        context: ServerCallContext,
    ) -> TaskPushNotificationConfig:
        stored = TaskPushNotificationConfig()
        stored.CopyFrom(notification_config)
        stored.task_id = task_id
        stored.id = stored.id or task_id
        owner = context.user.user_name
        await self.rows.push_set(task_id, owner, stored.id, stored.SerializeToString())
        return stored

    async def get_info(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        found = await self.rows.push_list(task_id, context.user.user_name)
        return [TaskPushNotificationConfig.FromString(body) for body in found]

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        found = await self.rows.push_list(task_id, None)
        return [TaskPushNotificationConfig.FromString(body) for body in found]

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        await self.rows.push_delete(task_id, context.user.user_name, config_id or task_id)


def version_number(version: TaskVersion) -> int:
    """The count a version of this store wraps (0: missing)."""
    value = version._value  # the store made it: an int
    assert isinstance(value, int)
    return value


def _event_bytes(event: Event) -> bytes:
    return to_stream_response(event).SerializeToString()


def _event(body: bytes) -> Event:
    response = StreamResponse.FromString(body)
    which = response.WhichOneof("payload")
    if which is None:
        raise ValueError("a stored task event has no payload")
    event: Event = getattr(response, which)
    return event


def open_store(
    settings: A2AServerConfig, sessions: SessionsConfig, rows: TaskRows, shared: bool
) -> TaskStore | RowsTaskStore:
    """`memory`: the SDK's, keeping `keepFinishedTasks` finished tasks; `sessions` (or a
    name from before, `sqlite` or a database URL): the rows of the session store, `rows`
    (`shared` when replicas share it). Raises `ConfigError` for a database the sessions
    are not in."""
    kind = settings.task_store
    if kind == "memory":
        return BoundedMemoryTaskStore(settings.keep_finished_tasks)
    if kind not in ("sessions", "sqlite"):
        if "://" not in kind:
            raise ConfigError(f"a2a.server.taskStore {kind!r} is none of memory or sessions")
        if sessions.url is None:
            raise ConfigError(
                "a2a.server.taskStore names a database, but the sessions are not kept there: "
                "A2A tasks live beside the sessions. Set sessions.url to that database "
                '(postgresql://…) and taskStore to "sessions".'
            )
        log.info("A2A tasks are kept beside the sessions, in the database of sessions.url")
    return RowsTaskStore(rows, shared)
