"""Task rows in raven.db (`raven.sessions.tasks.TaskRows`), beside the sessions.

The processes of one machine share the file; a write is refused when the task is not at
the version it was based on. A task's runner is a process (`holder`, a pid) that runs
it in the turns of one session (`session_id`) while it holds that session's claim. The
count of each owner's (and each context's) tasks in each state is kept by triggers
(`task_counts`), so a page's total costs the same however many tasks there are. Never
decodes a task.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

from raven.sessions.records import process_alive
from raven.sessions.tasks import (
    Saved,
    TaskFilter,
    TaskPage,
    TaskRow,
    TaskStale,
    Unrun,
    counted,
)

if TYPE_CHECKING:
    from raven.sessions.sqlite import SqliteStore

_COLUMNS = "id, owner, context_id, state, updated_us, body"


class SqliteTasks:
    """The task methods of `SqliteSessions` (whose `db` they use)."""

    db: SqliteStore

    async def task_get(self, task_id: str, owner: str) -> tuple[TaskRow, int] | None:
        return await self.db.call(self._task_get, task_id, owner)

    async def task_save(
        self,
        row: TaskRow,
        version: int,
        events: Sequence[bytes] = (),
        unless: Collection[str] | None = None,
        final: bool = False,
        runner: str | None = None,
    ) -> Saved:
        """`events` are only counted here: no other replica follows the task."""
        # Staged: committed with the next write or at the end of the loop's step, before
        # anyone told of the change runs.
        steps = max(1, len(events))
        return await self.db.stage(self._task_save, row, version, unless, runner, final, steps)

    async def tasks_run_elsewhere(self, task_ids: list[str]) -> set[str]:
        found = await self.db.call(self._runners, task_ids)
        me = os.getpid()
        return {t for t, pid in found if pid != me and process_alive(pid)}

    async def task_page(self, where: TaskFilter, limit: int) -> TaskPage:
        return await self.db.call(self._task_page, where, limit)

    async def task_delete(self, task_id: str, owner: str) -> None:
        await self.db.call(self._task_delete, task_id, owner)

    async def tasks_unrun(self, states: Collection[str]) -> list[Unrun]:
        found = await self.db.call(self._tasks_in, list(states))
        unrun = []
        for task_id, owner, session_id, state, version, updated_us, pid, claimant in found:
            alive = process_alive(pid)
            if not (alive and claimant == pid):
                unrun.append(
                    Unrun(task_id, owner, session_id, state, version, updated_us, not alive)
                )
        return unrun

    async def push_set(self, task_id: str, owner: str, config_id: str, body: bytes) -> None:
        await self.db.call(self._push_set, task_id, owner, config_id, body)

    async def push_list(self, task_id: str, owner: str | None) -> list[bytes]:
        return await self.db.call(self._push_list, task_id, owner)

    async def push_delete(self, task_id: str, owner: str, config_id: str) -> None:
        await self.db.call(self._push_delete, task_id, owner, config_id)

    async def delivery_get(self, task_id: str) -> dict[str, str]:
        return await self.db.call(self._delivery_get, task_id)

    async def delivery_change(
        self, task_id: str, config_id: str, how: Callable[[str | None], str]
    ) -> str:
        return await self.db.call(self._delivery_change, task_id, config_id, how)

    # -- on the store's thread (or inline) ---------------------------------------------

    def _task_get(self, task_id: str, owner: str) -> tuple[TaskRow, int] | None:
        with self.db.reading() as db:
            found = db.execute(
                f"SELECT {_COLUMNS}, version FROM tasks WHERE id = ? AND owner = ?",
                (task_id, owner),
            ).fetchone()
        if found is None:
            return None
        return TaskRow(*found[:6]), int(found[6])

    def _task_save(
        self,
        row: TaskRow,
        version: int,
        unless: Collection[str] | None,
        runner: str | None,
        final: bool,
        steps: int,
    ) -> Saved:
        holder = os.getpid() if runner is not None else None
        with self.db.writing() as db:
            if version == 0 and unless is None:
                try:
                    found = db.execute(
                        f"INSERT INTO tasks ({_COLUMNS}, version, holder, session_id, pushes) "
                        "VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, "
                        "(SELECT count(*) FROM task_push_configs WHERE task_id = ?)) "
                        "RETURNING pushes",
                        (*_values(row), holder, runner, row.id),
                    ).fetchone()
                except sqlite3.IntegrityError:
                    raise TaskStale(row.id) from None
                return Saved(1, found[0] > 0)
            guard, args = _guard(version, unless)
            found = db.execute(
                "UPDATE tasks SET state = ?, updated_us = ?, body = ?, version = version + ?, "
                "holder = CASE WHEN ? THEN NULL ELSE COALESCE(?, holder) END, "
                "session_id = COALESCE(?, session_id) "
                f"WHERE id = ? AND owner = ? AND {guard} RETURNING version, pushes",
                (
                    row.state,
                    row.updated_us,
                    row.body,
                    steps,
                    final,
                    holder,
                    runner,
                    row.id,
                    row.owner,
                    *args,
                ),
            ).fetchone()
        if found is None:
            raise TaskStale(row.id)
        return Saved(int(found[0]), found[1] > 0)

    def _task_page(self, where: TaskFilter, limit: int) -> TaskPage:
        sql, args = _page_query(where)
        with self.db.reading() as db:
            rows = db.execute(
                f"SELECT {_COLUMNS} FROM tasks WHERE {sql} "
                "ORDER BY updated_us DESC, id DESC LIMIT ?",
                (*args, limit),
            ).fetchall()
            total = _total(db, where)
        return TaskPage([TaskRow(*r) for r in rows], total)

    def _task_delete(self, task_id: str, owner: str) -> None:
        with self.db.writing() as db:
            found = db.execute("DELETE FROM tasks WHERE id = ? AND owner = ?", (task_id, owner))
            if found.rowcount:
                db.execute("DELETE FROM task_push_configs WHERE task_id = ?", (task_id,))

    def _runners(self, task_ids: list[str]) -> list[tuple[str, int]]:
        """(id, runner) of those of `task_ids` whose runner holds their session's claim."""
        marks = ", ".join("?" * len(task_ids))
        with self.db.reading() as db:
            return db.execute(
                "SELECT t.id, t.holder FROM tasks t JOIN sessions s ON s.id = t.session_id "
                f"WHERE t.id IN ({marks}) AND s.turn_pid = t.holder",
                task_ids,
            ).fetchall()

    def _tasks_in(self, states: list[str]) -> list[tuple[Any, ...]]:
        """Each task in one of `states`, with its runner and its session's claimant."""
        marks = ", ".join("?" * len(states))
        with self.db.reading() as db:
            return db.execute(
                "SELECT t.id, t.owner, t.session_id, t.state, t.version, t.updated_us, "
                "t.holder, s.turn_pid "
                "FROM tasks t LEFT JOIN sessions s ON s.id = t.session_id "
                f"WHERE t.state IN ({marks})",
                states,
            ).fetchall()

    def _push_set(self, task_id: str, owner: str, config_id: str, body: bytes) -> None:
        with self.db.writing() as db:
            db.execute(
                "INSERT INTO task_push_configs (task_id, config_id, owner, body) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (task_id, config_id) DO UPDATE SET "
                "owner = excluded.owner, body = excluded.body, delivery = NULL",
                (task_id, config_id, owner, body),
            )

    def _push_list(self, task_id: str, owner: str | None) -> list[bytes]:
        sql = "SELECT body FROM task_push_configs WHERE task_id = ?"
        args: tuple[str, ...] = (task_id,)
        if owner is not None:
            sql, args = sql + " AND owner = ?", (task_id, owner)
        with self.db.reading() as db:
            return [body for (body,) in db.execute(sql + " ORDER BY rowid", args)]

    def _push_delete(self, task_id: str, owner: str, config_id: str) -> None:
        with self.db.writing() as db:
            db.execute(
                "DELETE FROM task_push_configs WHERE task_id = ? AND config_id = ? AND owner = ?",
                (task_id, config_id, owner),
            )

    def _delivery_get(self, task_id: str) -> dict[str, str]:
        with self.db.reading() as db:
            rows = db.execute(
                "SELECT config_id, delivery FROM task_push_configs "
                "WHERE task_id = ? AND delivery IS NOT NULL",
                (task_id,),
            ).fetchall()
        return dict(rows)

    def _delivery_change(
        self, task_id: str, config_id: str, how: Callable[[str | None], str]
    ) -> str:
        with self.db.writing() as db:
            found = db.execute(
                "SELECT delivery FROM task_push_configs WHERE task_id = ? AND config_id = ?",
                (task_id, config_id),
            ).fetchone()
            state = how(None if found is None else found[0])
            db.execute(
                "UPDATE task_push_configs SET delivery = ? WHERE task_id = ? AND config_id = ?",
                (state, task_id, config_id),
            )
        return state


def _values(row: TaskRow) -> tuple[object, ...]:
    return (row.id, row.owner, row.context_id, row.state, row.updated_us, row.body)


def _guard(version: int, unless: Collection[str] | None) -> tuple[str, list[object]]:
    """The WHERE clause a write is allowed under, and its arguments."""
    if unless is None:
        return "version = ?", [version]
    marks = ", ".join("?" * len(unless))
    return f"state NOT IN ({marks})", list(unless)


def _page_query(where: TaskFilter) -> tuple[str, list[object]]:
    sql, args = ["owner = ?"], list[object]([where.owner])
    if where.context_id is not None:
        sql.append("context_id = ?")
        args.append(where.context_id)
    if where.state is not None:
        sql.append("state = ?")
        args.append(where.state)
    if where.since_us is not None:
        sql.append("updated_us >= ?")
        args.append(where.since_us)
    if where.after is not None:
        sql.append("(updated_us, id) < (?, ?)")
        args.extend(where.after)
    return " AND ".join(sql), args


def _total(db: sqlite3.Connection, where: TaskFilter) -> int:
    """From the counts, unless a time bound asks for a count of the rows themselves."""
    if where.since_us is not None:
        sql, args = _page_query(
            TaskFilter(where.owner, where.context_id, where.state, where.since_us)
        )
        return int(db.execute(f"SELECT count(*) FROM tasks WHERE {sql}", args).fetchone()[0])
    sql, args = "owner = ? AND context_id = ?", [where.owner, counted(where.context_id)]
    if where.state is not None:
        sql += " AND state = ?"
        args.append(where.state)
    found = db.execute(f"SELECT COALESCE(sum(n), 0) FROM task_counts WHERE {sql}", args)
    return int(found.fetchone()[0])
