from __future__ import annotations

import logging

import pytest
from a2a.server.context import ServerCallContext
from a2a.types import ListTasksRequest, Task, TaskState, TaskStatus

from raven.a2a.store import BoundedMemoryTaskStore, StoreOutage, unreachable


def task(task_id: str, state: TaskState.ValueType) -> Task:
    return Task(id=task_id, context_id="c", status=TaskStatus(state=state))


async def test_the_oldest_finished_tasks_are_forgotten_running_ones_kept() -> None:
    store = BoundedMemoryTaskStore(keep=3)
    context = ServerCallContext()
    await store.save(task("running", TaskState.TASK_STATE_WORKING), context)
    await store.save(task("waiting", TaskState.TASK_STATE_INPUT_REQUIRED), context)
    for n in range(5):
        await store.save(task(f"t{n}", TaskState.TASK_STATE_WORKING), context)
        await store.save(task(f"t{n}", TaskState.TASK_STATE_COMPLETED), context)
    kept = {t.id for t in (await store.list(ListTasksRequest(), context)).tasks}
    assert kept == {"running", "waiting", "t2", "t3", "t4"}
    assert await store.get("t0", context) is None
    await store.save(task("running", TaskState.TASK_STATE_FAILED), context)
    assert await store.get("t2", context) is None
    assert (await store.get("running", context)) is not None
    await store.delete("t4", context)
    await store.save(task("t5", TaskState.TASK_STATE_CANCELED), context)
    assert await store.get("t3", context) is not None  # t4's place was free


async def test_each_forgotten_task_leaves_its_own_owners_tasks() -> None:
    from raven.a2a.auth import Caller

    store = BoundedMemoryTaskStore(keep=1)
    alice, bob = ServerCallContext(user=Caller("alice")), ServerCallContext(user=Caller("bob"))
    await store.save(task("a1", TaskState.TASK_STATE_COMPLETED), alice)
    await store.save(task("b1", TaskState.TASK_STATE_COMPLETED), bob)
    assert await store.get("a1", alice) is None
    assert await store.get("b1", bob) is not None
    assert await store.get("b1", alice) is None  # still scoped to its owner


def test_an_outage_is_said_once_with_its_end_and_a_fault_keeps_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from raven.sessions import StoreUnavailable

    lost = StoreUnavailable("the session store is unreachable: connection reset")
    assert unreachable(lost) and unreachable(ConnectionRefusedError())
    assert not unreachable(ValueError("a bug"))
    outage = StoreOutage(logging.getLogger("test.outage"), "watching")
    with caplog.at_level(logging.WARNING, "test.outage"):
        for _ in range(3):  # a restart: tried again and again
            outage.failed(lost)
        outage.worked()
        outage.worked()
        outage.failed(bug := ValueError("a bug"))
    said = [(r.levelname, r.getMessage(), bool(r.exc_info)) for r in caplog.records]
    assert said == [
        ("WARNING", f"watching: the task store cannot be reached ({lost})", False),
        ("WARNING", "watching: the task store can be reached again", False),
        ("ERROR", "watching failed", True),
    ]
    assert caplog.records[-1].exc_info is not None and caplog.records[-1].exc_info[1] is bug
