"""The A2A tasks an earlier Raven kept in a file of their own, moved beside the sessions.

Before tasks lived in the session store, `taskStore: "sqlite"` kept them in the SDK's
tables in `a2a-tasks.db` in the data directory. On the first start with tasks in the
session store, that file's tasks and push configs are read (with `sqlite3`, as the SDK
wrote them) and written as rows there; the file is then renamed `a2a-tasks.db.moved`,
kept for the person to delete. Tasks already in the session store are left as they are.
Never writes the old file.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
from pathlib import Path

from a2a.types import Task, TaskPushNotificationConfig, TaskState
from google.protobuf.json_format import Parse, ParseDict

from raven.engine import TaskRow, TaskRows, TaskStale
from raven.errors import RavenError

log = logging.getLogger(__name__)

FILE = "a2a-tasks.db"
MOVED = ".moved"


class LegacyTasksDamaged(RavenError):
    """The old task file cannot be read."""


async def move_tasks(data_dir: Path, rows: TaskRows) -> int:
    """Move the tasks of `data_dir/a2a-tasks.db`, if there is one, into `rows`; how many
    were moved."""
    path = data_dir / FILE
    if not path.exists():
        return 0
    try:
        tasks, configs = await asyncio.to_thread(_read, path)
    except (sqlite3.Error, ValueError) as exc:
        raise LegacyTasksDamaged(
            f"cannot move the A2A tasks of {path} into the session store: it is damaged "
            f"({exc}); move it aside to start without them (they are lost), or put back a copy"
        ) from None
    moved = 0
    for owner, task in tasks:
        stamp = task.status.timestamp.ToMicroseconds() if task.status.HasField("timestamp") else 0
        state = TaskState.Name(task.status.state)
        row = TaskRow(task.id, owner, task.context_id, state, stamp, task.SerializeToString())
        try:
            await rows.task_save(row, 0)
        except TaskStale:
            continue  # moved before (a start that stopped half way), or a task of today
        moved += 1
    for task_id, owner, config in configs:
        await rows.push_set(task_id, owner, config.id, config.SerializeToString())
    for suffix in ("-wal", "-shm", ""):
        part = path.with_name(path.name + suffix)
        if part.exists():
            part.rename(part.with_name(part.name + MOVED))
    log.warning(
        "moved %d A2A task(s) from %s into the session store; the old file is kept as %s%s",
        moved,
        path,
        path.name,
        MOVED,
    )
    return moved


def _read(
    path: Path,
) -> tuple[list[tuple[str, Task]], list[tuple[str, str, TaskPushNotificationConfig]]]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
        tasks = []
        if "tasks" in tables:
            found = db.execute(
                "SELECT id, context_id, owner, status, artifacts, history, metadata FROM tasks"
            )
            for task_id, context_id, owner, status, artifacts, history, metadata in found:
                task = Task(id=task_id, context_id=context_id)
                ParseDict(json.loads(status), task.status)
                for artifact in json.loads(artifacts or "[]"):
                    ParseDict(artifact, task.artifacts.add())
                for message in json.loads(history or "[]"):
                    ParseDict(message, task.history.add())
                if metadata and (kept := json.loads(metadata)):
                    task.metadata.update(kept)
                tasks.append((owner or "", task))
        configs = []
        if "push_notification_configs" in tables:
            found = db.execute("SELECT task_id, owner, config_data FROM push_notification_configs")
            for task_id, owner, data in found:
                text = data.decode() if isinstance(data, bytes) else data
                config = Parse(text, TaskPushNotificationConfig())
                configs.append((task_id, owner or "", config))
    return tasks, configs
