"""Which process runs a task's turn, in a store that outlives processes.

With a task store in a file or a database, the process running a task's turn holds a
lease on it (a row of `raven_task_leases`: the holder and until when) and renews it
every third of `a2a.server.leaseS`. A lease whose holder stopped renewing it, or whose
holder is a process of this machine that no longer runs (a kill -9, a reboot), has
lapsed: any replica then ends the task failed (`TaskService`), and a follow-up to a
task waiting for input is taken over by whichever replica receives it. The holder is
named as `raven.holders` names it. Never writes a task.
"""

from __future__ import annotations

import time

from sqlalchemy import Column, Float, MetaData, String, Table, and_, delete, insert, select, update
from sqlalchemy.ext.asyncio import AsyncEngine

from raven.holders import gone, parse, this_holder

_metadata = MetaData()
_leases = Table(
    "raven_task_leases",
    _metadata,
    Column("task_id", String(255), primary_key=True),
    Column("holder", String(255), nullable=False),
    Column("until", Float, nullable=False),
)


class Leases:
    """The leases of one task store's tasks."""

    def __init__(self, engine: AsyncEngine, lease_s: float) -> None:
        self._engine = engine
        self.lease_s = lease_s
        self._me = this_holder()
        self._ready = False

    async def initialize(self) -> None:
        if not self._ready:
            async with self._engine.begin() as conn:
                await conn.run_sync(_metadata.create_all)
            self._ready = True

    async def take(self, task_id: str) -> None:
        """Hold the task's lease from now on (whoever held it before)."""
        await self.initialize()
        async with self._engine.begin() as conn:
            await conn.execute(delete(_leases).where(_leases.c.task_id == task_id))
            await conn.execute(
                insert(_leases).values(task_id=task_id, holder=self._me, until=self._until())
            )

    async def renew(self, task_ids: list[str]) -> None:
        if task_ids:
            async with self._engine.begin() as conn:
                await conn.execute(
                    update(_leases)
                    .where(and_(_leases.c.task_id.in_(task_ids), _leases.c.holder == self._me))
                    .values(until=self._until())
                )

    async def release(self, task_id: str) -> None:
        await self.initialize()
        async with self._engine.begin() as conn:
            await conn.execute(
                delete(_leases).where(
                    and_(_leases.c.task_id == task_id, _leases.c.holder == self._me)
                )
            )

    async def held_elsewhere(self, task_id: str) -> bool:
        """True when another live process holds the task's lease."""
        return task_id in await self.held([task_id], others=True)

    async def held(self, task_ids: list[str], others: bool = False) -> set[str]:
        """Those of `task_ids` with a lease that has not lapsed (`others`: not this
        process's)."""
        await self.initialize()
        if not task_ids:
            return set()
        async with self._engine.connect() as conn:
            rows = await conn.execute(
                select(_leases.c.task_id, _leases.c.holder, _leases.c.until).where(
                    _leases.c.task_id.in_(task_ids)
                )
            )
            now = time.time()
            return {
                task_id
                for task_id, holder, until in rows
                if until >= now and not gone(parse(holder)) and not (others and holder == self._me)
            }

    def _until(self) -> float:
        return time.time() + self.lease_s
