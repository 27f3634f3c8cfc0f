"""Which process runs a stored task, and the end of tasks whose process is gone.

A task store in a file or a database outlives the process that ran a task: after
a kill -9, a task saved as working would stay working forever. Every save of an
unfinished task stamps it with the process saving it (digests of the host and
its boot, and the pid, in the task's metadata under `raven.runner`); when a
server starts, each task still submitted or working whose stamp names a process
of this machine that no longer runs ends FAILED with `STOPPED_MESSAGE`. Never
touches a task another live process or another machine runs, nor one waiting for
input (a follow-up resumes it).
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import uuid
from pathlib import Path
from typing import Any

from a2a.helpers import new_text_part
from a2a.server.context import ServerCallContext
from a2a.server.tasks import DatabaseTaskStore
from a2a.types import Message, Role, Task, TaskState, TaskStatus
from google.protobuf.json_format import MessageToDict
from sqlalchemy import select

from raven.a2a.auth import Caller
from raven.a2a.executor import STOPPED_MESSAGE

log = logging.getLogger(__name__)

RUNNER_KEY = "raven.runner"
RUNNING_STATES = (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)


def this_process() -> dict[str, Any]:
    """The stamp of this process: which machine, which boot of it, which pid. Peers read a
    task's metadata, so the machine and its boot are a digest, never the host's name."""
    return {"host": _digest(socket.gethostname()), "boot": _digest(_boot_id()), "pid": os.getpid()}


def gone(stamp: Any) -> bool:
    """True when `stamp` names a process of this machine that no longer runs."""
    if not isinstance(stamp, dict) or stamp.get("host") != _digest(socket.gethostname()):
        return False  # another machine's (or no stamp): not ours to judge
    if stamp.get("boot") != _digest(_boot_id()):
        return True  # this machine restarted since
    pid = stamp.get("pid")
    if not isinstance(pid, int | float) or int(pid) == os.getpid():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class StampedTaskStore(DatabaseTaskStore):
    """The SDK's database store, stamping every unfinished task it saves with its runner."""

    async def save(self, task: Task, context: ServerCallContext) -> None:
        if task.status.state in RUNNING_STATES:
            task.metadata.update({RUNNER_KEY: this_process()})
        await super().save(task, context)

    async def fail_orphans(self) -> list[str]:
        """End FAILED every submitted or working task whose runner is gone; their ids."""
        await self.initialize()
        states = [TaskState.Name(s) for s in RUNNING_STATES]
        model = self.task_model
        async with self.async_session_maker() as session:
            rows = await session.execute(
                select(model.id, model.owner).where(model.status["state"].as_string().in_(states))
            )
            candidates = list(rows.all())
        failed = []
        for task_id, owner in candidates:
            context = ServerCallContext(user=Caller(owner))
            task = await self.get(task_id, context)
            if task is None or task.status.state not in RUNNING_STATES:
                continue
            stamp = MessageToDict(task.metadata).get(RUNNER_KEY)
            if not gone(stamp):
                continue
            message = Message(
                message_id=uuid.uuid4().hex,
                role=Role.ROLE_AGENT,
                task_id=task.id,
                context_id=task.context_id,
                parts=[new_text_part(STOPPED_MESSAGE)],
            )
            status = TaskStatus(state=TaskState.TASK_STATE_FAILED, message=message)
            status.timestamp.GetCurrentTime()
            task.status.CopyFrom(status)
            await self.save(task, context)
            failed.append(task.id)
        if failed:
            log.warning("%d A2A task(s) of a stopped Raven ended failed", len(failed))
        return failed


def _digest(text: str) -> str:
    return hashlib.sha256(f"raven-runner:{text}".encode()).hexdigest()[:16]


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""
