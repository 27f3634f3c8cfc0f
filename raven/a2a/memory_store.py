"""The default task store: the SDK's in-memory store, keeping the newest finished tasks.

A gateway that runs for months must not grow with every task it ever served. Running
and waiting tasks are always kept; of the finished ones (completed, failed, canceled,
rejected) only the newest `keep` are, the oldest forgotten first. Never touches a disk.
"""

from __future__ import annotations

from collections import OrderedDict

from a2a.auth.user import User
from a2a.server.agent_execution.active_task import TERMINAL_TASK_STATES
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore, TaskStore
from a2a.types import ListTasksRequest, ListTasksResponse, Task


class BoundedMemoryTaskStore(TaskStore):
    def __init__(self, keep: int) -> None:
        self._tasks = InMemoryTaskStore()
        self._keep = keep
        self._finished: OrderedDict[str, User] = OrderedDict()
        """Finished tasks, oldest first, with their owner (not the whole call context, which
        holds the request's headers)."""

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await self._tasks.save(task, context)
        if task.status.state not in TERMINAL_TASK_STATES:
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
