"""Task rows: the tasks a face keeps beside the sessions, in the same store.

A face (A2A) hands the store each task as opaque bytes with the few columns the store
orders and filters by: its owner, its context, its state's name and the time of its
status. Every write names the version it is based on and a stale one is refused
(`TaskStale`), so a late write of one process never undoes what another wrote. A store
replicas share also keeps each write's event, for followers on other replicas, and says
when a task changed (`Watcher.task_changed`).

A task's work runs in the turns of one session, and the process that runs it names
itself and that session (`task_save(..., runner=)`): it runs the task while it holds the
session's claim, and no longer once it does not (`tasks_unrun`). The session's claim is
the one lease; a task has none of its own. Beside the tasks: their push configs and what
became of their deliveries. Knows nothing of what a task means.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

ALL_CONTEXTS = "*"
"""The context of an owner's counts over every context (`counted`)."""
ENDED_EVENTS_KEPT_S = 60.0
"""How long a task's events before its end outlive it in a shared store: a follower on
another replica that reads late (a loaded machine) still sees every state it went
through, while the store does not grow with every task ever run."""


def counted(context_id: str | None) -> str:
    """The context under which the stores' triggers count an owner's tasks (a context's
    own counts are `c:<id>`, so no context id can meet `ALL_CONTEXTS`)."""
    return ALL_CONTEXTS if context_id is None else f"c:{context_id}"


class TaskStale(Exception):
    """The task is not at the version a write was based on (or, for an overwrite, it is
    gone or in a state that never changes)."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id} changed meanwhile")
        self.task_id = task_id


@dataclass(frozen=True, slots=True)
class TaskRow:
    id: str
    owner: str
    context_id: str
    state: str
    updated_us: int
    """When its status was set, in microseconds since the epoch (0: never)."""
    body: bytes


class Unrun(NamedTuple):
    """A task that no live process runs now (`TaskRows.tasks_unrun`)."""

    id: str
    owner: str
    session_id: str | None
    """The session whose turns run it (None: none was named)."""
    state: str
    version: int
    updated_us: int
    gone: bool
    """Its runner is known to be gone: a process of this machine that no longer runs, or
    none is named. (One of another machine that does not hold the claim may be waiting
    for it.)"""


class Saved(NamedTuple):
    version: int
    pushes: bool
    """The task has push configs (of any owner): its change is to be delivered."""


@dataclass(frozen=True, slots=True)
class TaskPage:
    rows: list[TaskRow]
    total: int
    """How many tasks match the filter, on every page."""


@dataclass(frozen=True, slots=True)
class TaskFilter:
    """Which of an owner's tasks a page lists, newest status first."""

    owner: str
    context_id: str | None = None
    state: str | None = None
    since_us: int | None = None
    """Only tasks whose status was set at or after this time."""
    after: tuple[int, str] | None = None
    """The (status time, id) of the last task of the previous page."""


class TaskRows(Protocol):
    async def task_get(self, task_id: str, owner: str) -> tuple[TaskRow, int] | None:
        """The owner's task and its version, or None."""
        ...

    async def task_save(
        self,
        row: TaskRow,
        version: int,
        events: Sequence[bytes] = (),
        unless: Collection[str] | None = None,
        final: bool = False,
        runner: str | None = None,
    ) -> Saved:
        """Write `row` based on `version` (0: the first write); its new version. With
        `unless`, overwrite whatever version is stored, but not a task in one of the
        states `unless` names. Raises `TaskStale`. A shared store keeps `events` (what
        the write did, in order; one for a first write) for followers elsewhere, each
        under a version of its own, so the task's version advances by one per event (by
        one with none); `final`: the task ends (nobody runs it any more; see
        `task_prune`). It tells them. With `runner` (a session id), this process runs the
        task in that session's turns from now on."""
        ...

    async def tasks_run_elsewhere(self, task_ids: list[str]) -> set[str]:
        """Those of `task_ids` another live process runs now: it holds the claim of the
        session the task runs in."""
        ...

    async def task_page(self, where: TaskFilter, limit: int) -> TaskPage:
        """One page of tasks, newest status first (ties by id, descending): its cost
        does not grow with the number of tasks kept."""
        ...

    async def task_delete(self, task_id: str, owner: str) -> None: ...

    async def tasks_unrun(self, states: Collection[str]) -> list[Unrun]:
        """Every task in one of `states` whose runner does not hold the claim of the
        session it runs in (or is gone)."""
        ...

    async def push_set(self, task_id: str, owner: str, config_id: str, body: bytes) -> None:
        """Keep (or replace) one push config of the owner's task."""
        ...

    async def push_list(self, task_id: str, owner: str | None) -> list[bytes]:
        """The task's push configs: the owner's, or with None everyone's (to deliver)."""
        ...

    async def push_delete(self, task_id: str, owner: str, config_id: str) -> None: ...

    async def delivery_get(self, task_id: str) -> dict[str, str]:
        """What became of the deliveries to each of the task's configs, by config id."""
        ...

    async def delivery_change(
        self, task_id: str, config_id: str, how: Callable[[str | None], str]
    ) -> str:
        """The config's delivery state becomes `how(state)`, in one transaction (replicas
        delivering to one config at once each count theirs); what it became. A config
        set again starts with no state."""
        ...


class SharedTaskRows(TaskRows, Protocol):
    async def task_events(self, task_id: str, after: int) -> list[tuple[int, bytes]]:
        """The events written with the task's versions after `after`, in order: (version,
        event). The events before a task's end are kept `ENDED_EVENTS_KEPT_S` after it."""
        ...

    async def task_prune(self) -> None:
        """Let go of the events before each end written over `ENDED_EVENTS_KEPT_S` ago
        (any replica may, on the engine's cadence; the end's own event stays)."""
        ...
