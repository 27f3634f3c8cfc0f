from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from a2a.server.cluster.version import TaskVersion
from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types import ListTasksRequest, Task, TaskState, TaskStatus
from a2a.utils.errors import InvalidParamsError

from raven.a2a.auth import Caller
from raven.a2a.store import (
    BoundedMemoryTaskStore,
    RowsTaskStore,
    StoreOutage,
    open_store,
    unreachable,
)
from raven.config import A2AServerConfig, ConfigError, Paths, SessionsConfig
from raven.sessions import Sessions, open_sessions


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


@pytest.fixture
async def rows(tmp_path: Path) -> AsyncIterator[Sessions]:
    paths = Paths(config_file=tmp_path / "config.json", data_dir=tmp_path / "data")
    store = open_sessions(SessionsConfig(), paths)
    yield store
    await store.aclose()


def settings(task_store: str) -> A2AServerConfig:
    return A2AServerConfig(token="t" * 32, task_store=task_store)


def test_tasks_share_a_database_only_with_the_sessions(rows: Sessions) -> None:
    assert isinstance(open_store(settings("memory"), SessionsConfig(), rows, False), TaskStore)
    for kind in ("sessions", "sqlite"):  # `sqlite`, from before, means beside the sessions
        assert isinstance(open_store(settings(kind), SessionsConfig(), rows, False), RowsTaskStore)
    url = "postgresql+asyncpg://raven@db/raven"
    with pytest.raises(ConfigError, match=r"Set sessions\.url to that database"):
        open_store(settings(url), SessionsConfig(), rows, False)
    shared = SessionsConfig(url="postgresql://raven@db/raven")
    assert isinstance(open_store(settings(url), shared, rows, True), RowsTaskStore)
    with pytest.raises(ConfigError, match="none of memory or sessions"):
        open_store(settings("redis"), SessionsConfig(), rows, False)


async def test_a_list_pages_through_every_task_once_and_refuses_a_made_up_token(
    rows: Sessions,
) -> None:
    store = RowsTaskStore(rows, shared=False)
    ann = ServerCallContext(user=Caller("ann"))
    for n in range(7):
        stamped = task(f"t{n}", TaskState.TASK_STATE_COMPLETED)
        stamped.status.timestamp.FromMicroseconds(1_000_000 + n)
        await store.save(
            stamped, event=None, prev=None, prev_version=TaskVersion.MISSING, context=ann
        )
    seen, token = [], ""
    while True:
        page = await store.list(ListTasksRequest(page_size=3, page_token=token), ann)
        assert page.total_size == 7 and page.page_size == 3
        seen += [t.id for t in page.tasks]
        token = page.next_page_token
        if not token:
            break
    assert seen == [f"t{n}" for n in reversed(range(7))]
    bob = ServerCallContext(user=Caller("bob"))
    assert (await store.list(ListTasksRequest(), bob)).total_size == 0
    with pytest.raises(InvalidParamsError):
        await store.list(ListTasksRequest(page_token="t3"), ann)
