"""Task rows in PostgreSQL (`raven.sessions.tasks.SharedTaskRows`), beside the sessions.

Each write is one statement (one round trip): the row, compared and set on its version,
the event it came with (for followers on other replicas, read with `task_events`), and a
NOTIFY on `raven_task` with the task's id and new version. A task's runner (`holder`)
runs it in the turns of one session (`session_id`) while it holds that session's claim,
which is the one lease: a task has none of its own. The counts of each owner's (and
context's) tasks in each state are kept by a trigger (`raven_task_counts`). Never
decodes a task.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import asyncpg

from raven.holders import gone, parse
from raven.sessions.postgres_schema import NOW
from raven.sessions.tasks import (
    ENDED_EVENTS_KEPT_S,
    Saved,
    TaskFilter,
    TaskPage,
    TaskRow,
    TaskStale,
    Unrun,
    counted,
)

TASK_CHANNEL = "raven_task"
_COLUMNS = "id, owner, context_id, state, updated_us, body"


_RUNNER = (
    # $9 the runner taking the task (NULL: it stays as it is), in the turns of session
    # $10; nobody runs a task that ended ($7)
    "holder = CASE WHEN $7 THEN NULL ELSE COALESCE($9, holder) END,"
    " session_id = COALESCE($10, session_id)"
)


def _write(guard: str) -> str:
    """The UPDATE of a task allowed under `guard` ($8), its events ($6, a version each)
    and, when the task ends ($7), its end noted (`task_prune` lets go of its earlier
    events later); its runner as `_RUNNER` says."""
    return (
        "WITH t AS (UPDATE raven_tasks SET state = $3, updated_us = $4, body = $5,"
        f" version = version + GREATEST(1, cardinality($6::bytea[])), {_RUNNER}"
        f" WHERE id = $1 AND owner = $2 AND {guard} RETURNING version, pushes),"
        " e AS (INSERT INTO raven_task_events (task_id, version, body)"
        " SELECT $1, t.version - cardinality($6::bytea[]) + x.n, x.b"
        " FROM t, unnest($6::bytea[]) WITH ORDINALITY AS x(b, n)),"
        " d AS (INSERT INTO raven_task_ends (task_id, version, at)"
        f" SELECT $1, version, {NOW} FROM t WHERE $7"
        " ON CONFLICT (task_id) DO UPDATE SET version = excluded.version, at = excluded.at)"
        f" SELECT version, pushes, pg_notify('{TASK_CHANNEL}', $1 || ' ' || version) FROM t"
    )


_INSERT = (
    "WITH t AS (INSERT INTO raven_tasks"
    " (id, owner, context_id, state, updated_us, body, version, holder, session_id, pushes)"
    " VALUES ($1, $2, $3, $4, $5, $6, 1, $8, $9,"
    " (SELECT count(*) FROM raven_task_push_configs WHERE task_id = $1))"
    " ON CONFLICT (id) DO NOTHING RETURNING version, pushes),"
    " e AS (INSERT INTO raven_task_events (task_id, version, body)"
    " SELECT $1, t.version, x.b FROM t, unnest($7::bytea[]) AS x(b))"
    f" SELECT version, pushes, pg_notify('{TASK_CHANNEL}', $1 || ' ' || version) FROM t"
)
_ON_VERSION = _write("version = $8")
_UNLESS = _write("state <> ALL($8::text[])")


class PostgresTasks:
    """The task methods of `PostgresSessions` (whose connections they use)."""

    _conn: Callable[..., AbstractAsyncContextManager[Any]]
    """A pooled connection (`PostgresSessions._conn`)."""
    _me: str

    async def task_get(self, task_id: str, owner: str) -> tuple[TaskRow, int] | None:
        async with self._conn() as conn:
            found = await conn.fetchrow(
                f"SELECT {_COLUMNS}, version FROM raven_tasks WHERE id = $1 AND owner = $2",
                task_id,
                owner,
            )
        return None if found is None else (_row(found), int(found["version"]))

    async def task_save(
        self,
        row: TaskRow,
        version: int,
        events: Sequence[bytes] = (),
        unless: Collection[str] | None = None,
        final: bool = False,
        runner: str | None = None,
    ) -> Saved:
        if version == 0 and unless is None and len(events) > 1:
            raise ValueError("a task's first write has one event")
        change = (row.state, row.updated_us, row.body, list(events))
        runs = (None if runner is None else self._me, runner)
        async with self._conn() as conn:
            if unless is not None:
                found = await conn.fetchrow(
                    _UNLESS, row.id, row.owner, *change, final, list(unless), *runs
                )
            elif version == 0:
                found = await conn.fetchrow(
                    _INSERT, row.id, row.owner, row.context_id, *change, *runs
                )
            else:
                found = await conn.fetchrow(
                    _ON_VERSION, row.id, row.owner, *change, final, version, *runs
                )
        if found is None:
            raise TaskStale(row.id)
        return Saved(int(found["version"]), found["pushes"] > 0)

    async def task_events(self, task_id: str, after: int) -> list[tuple[int, bytes]]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT version, body FROM raven_task_events WHERE task_id = $1 AND version > $2"
                " ORDER BY version",
                task_id,
                after,
            )
        return [(int(r["version"]), bytes(r["body"])) for r in rows]

    async def task_page(self, where: TaskFilter, limit: int) -> TaskPage:
        sql, args = _page_query(where)
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT {_COLUMNS} FROM raven_tasks WHERE {sql}"
                f" ORDER BY updated_us DESC, id DESC LIMIT ${len(args) + 1}",
                *args,
                limit,
            )
            total = await _total(conn, where)
        return TaskPage([_row(r) for r in rows], total)

    async def task_delete(self, task_id: str, owner: str) -> None:
        async with self._conn(transaction=True) as conn:
            deleted = await conn.execute(
                "DELETE FROM raven_tasks WHERE id = $1 AND owner = $2", task_id, owner
            )
            if not deleted.endswith(" 0"):
                await conn.execute("DELETE FROM raven_task_events WHERE task_id = $1", task_id)
                await conn.execute("DELETE FROM raven_task_ends WHERE task_id = $1", task_id)
                await conn.execute(
                    "DELETE FROM raven_task_push_configs WHERE task_id = $1", task_id
                )

    async def task_prune(self) -> None:
        async with self._conn() as conn:
            await conn.execute(
                "WITH x AS (DELETE FROM raven_task_ends"
                f" WHERE at < {NOW} - $1 RETURNING task_id, version)"
                " DELETE FROM raven_task_events e USING x"
                " WHERE e.task_id = x.task_id AND e.version < x.version",
                ENDED_EVENTS_KEPT_S,
            )

    async def tasks_run_elsewhere(self, task_ids: list[str]) -> set[str]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT t.id, t.holder FROM raven_tasks t"
                " JOIN raven_sessions s ON s.id = t.session_id"
                " WHERE t.id = ANY($1::text[]) AND t.holder <> $2"
                f" AND s.turn_holder = t.holder AND s.turn_until >= {NOW}",
                task_ids,
                self._me,
            )
        return {r["id"] for r in rows if not gone(parse(r["holder"]))}

    async def tasks_unrun(self, states: Collection[str]) -> list[Unrun]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT t.id, t.owner, t.session_id, t.state, t.version, t.updated_us, t.holder,"
                f" s.turn_holder = t.holder AND s.turn_until >= {NOW} AS claims"
                " FROM raven_tasks t LEFT JOIN raven_sessions s ON s.id = t.session_id"
                " WHERE t.state = ANY($1::text[])",
                list(states),
            )
        unrun = []
        for r in rows:
            away = r["holder"] is None or gone(parse(r["holder"]))
            if away or not r["claims"]:
                task = (r["id"], r["owner"], r["session_id"], r["state"], r["version"])
                unrun.append(Unrun(*task, r["updated_us"], away))
        return unrun

    async def push_set(self, task_id: str, owner: str, config_id: str, body: bytes) -> None:
        async with self._conn() as conn:
            await conn.execute(
                "INSERT INTO raven_task_push_configs (task_id, config_id, owner, body)"
                " VALUES ($1, $2, $3, $4) ON CONFLICT (task_id, config_id) DO UPDATE SET"
                " owner = excluded.owner, body = excluded.body, delivery = NULL",
                task_id,
                config_id,
                owner,
                body,
            )

    async def push_list(self, task_id: str, owner: str | None) -> list[bytes]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT body FROM raven_task_push_configs WHERE task_id = $1"
                " AND ($2::text IS NULL OR owner = $2) ORDER BY added",
                task_id,
                owner,
            )
        return [bytes(r["body"]) for r in rows]

    async def push_delete(self, task_id: str, owner: str, config_id: str) -> None:
        async with self._conn() as conn:
            await conn.execute(
                "DELETE FROM raven_task_push_configs"
                " WHERE task_id = $1 AND config_id = $2 AND owner = $3",
                task_id,
                config_id,
                owner,
            )

    async def delivery_get(self, task_id: str) -> dict[str, str]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT config_id, delivery FROM raven_task_push_configs"
                " WHERE task_id = $1 AND delivery IS NOT NULL",
                task_id,
            )
        return {r["config_id"]: r["delivery"] for r in rows}

    async def delivery_change(
        self, task_id: str, config_id: str, how: Callable[[str | None], str]
    ) -> str:
        async with self._conn(transaction=True) as conn:
            found = await conn.fetchrow(
                "SELECT delivery FROM raven_task_push_configs"
                " WHERE task_id = $1 AND config_id = $2 FOR UPDATE",
                task_id,
                config_id,
            )
            state = how(None if found is None else found["delivery"])
            await conn.execute(
                "UPDATE raven_task_push_configs SET delivery = $3"
                " WHERE task_id = $1 AND config_id = $2",
                task_id,
                config_id,
                state,
            )
        return state


def _row(found: Any) -> TaskRow:
    return TaskRow(
        found["id"],
        found["owner"],
        found["context_id"],
        found["state"],
        int(found["updated_us"]),
        bytes(found["body"]),
    )


def _page_query(where: TaskFilter) -> tuple[str, list[object]]:
    args: list[object] = [where.owner]
    sql = ["owner = $1"]

    def param(value: object) -> str:
        args.append(value)
        return f"${len(args)}"

    if where.context_id is not None:
        sql.append(f"context_id = {param(where.context_id)}")
    if where.state is not None:
        sql.append(f"state = {param(where.state)}")
    if where.since_us is not None:
        sql.append(f"updated_us >= {param(where.since_us)}")
    if where.after is not None:
        stamp, last = where.after
        sql.append(f"(updated_us, id) < ({param(stamp)}, {param(last)})")
    return " AND ".join(sql), args


async def _total(conn: asyncpg.Connection, where: TaskFilter) -> int:
    """From the counts, unless a time bound asks for a count of the rows themselves."""
    if where.since_us is not None:
        bounded = TaskFilter(where.owner, where.context_id, where.state, where.since_us)
        sql, args = _page_query(bounded)
        return int(await conn.fetchval(f"SELECT count(*) FROM raven_tasks WHERE {sql}", *args))
    found = await conn.fetchval(
        "SELECT COALESCE(sum(n), 0) FROM raven_task_counts"
        " WHERE owner = $1 AND context_id = $2 AND ($3::text IS NULL OR state = $3)",
        where.owner,
        counted(where.context_id),
        where.state,
    )
    return int(found)
