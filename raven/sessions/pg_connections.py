"""The PostgreSQL store's connections, reused without a task or a timer for each use.

asyncpg's own pool shields each release in a task of its own and times each acquire: about
30 µs of CPU a statement against a real server, where a list takes 0.05. Here an idle connection
is taken and given back in place; a new one is opened while fewer than `size` are open;
otherwise the caller waits, within the deadline it gives, for one given back. A connection
that a cancel, a timeout or a lost server may have left mid-statement is closed, never
used again. Knows nothing of sessions; never runs a statement itself.
"""

from __future__ import annotations

import asyncio
import collections

import asyncpg


class Connections:
    def __init__(self, dsn: str, size: int, connect_s: float, command_s: float) -> None:
        self._dsn = dsn
        self._size = size
        self._connect_s = connect_s
        self._command_s = command_s
        self._idle: list[asyncpg.Connection] = []
        self._open = 0
        """Connections open: idle, in use, or being opened."""
        self._waiters: collections.deque[asyncio.Future[asyncpg.Connection | None]] = (
            collections.deque()
        )
        """Callers waiting for a connection (None: one was closed, open another)."""
        self._closed = False

    async def acquire(self, timeout_s: float) -> asyncpg.Connection:
        """A connection for the caller alone until `release`; raises `TimeoutError` when
        none is free within `timeout_s`, or what connecting raises."""
        async with asyncio.timeout(timeout_s):
            while True:
                while self._idle:
                    conn = self._idle.pop()
                    if not conn.is_closed():
                        return conn
                    self._open -= 1
                if self._open < self._size:
                    return await self._connect()
                given = await self._wait()
                if given is not None:
                    return given

    def release(self, conn: asyncpg.Connection, reuse: bool) -> None:
        """Give `conn` back: to the next caller waiting, else to the idle ones; closed
        instead unless `reuse` (nothing may be left half-done on it)."""
        if not reuse or self._closed or conn.is_closed():
            conn.terminate()
            self._open -= 1
            self._give(None)
        elif not self._give(conn):
            self._idle.append(conn)

    async def aclose(self, timeout_s: float) -> None:
        """Close the idle connections (within `timeout_s`, else cut them); those in use are
        closed as they are given back."""
        self._closed = True
        idle, self._idle = self._idle, []
        self._open -= len(idle)
        try:
            async with asyncio.timeout(timeout_s):
                await asyncio.gather(*(conn.close() for conn in idle))
        except TimeoutError:
            for conn in idle:
                conn.terminate()

    async def _connect(self) -> asyncpg.Connection:
        self._open += 1
        try:
            conn: asyncpg.Connection = await asyncpg.connect(
                self._dsn, timeout=self._connect_s, command_timeout=self._command_s
            )
        except BaseException:
            self._open -= 1
            self._give(None)
            raise
        return conn

    async def _wait(self) -> asyncpg.Connection | None:
        waiter: asyncio.Future[asyncpg.Connection | None]
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():  # given, then cancelled: pass it on
                given = waiter.result()
                if given is not None:
                    self.release(given, reuse=True)
                else:
                    self._give(None)
            raise

    def _give(self, conn: asyncpg.Connection | None) -> bool:
        """Hand `conn` (or a free place, None) to the first caller still waiting."""
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(conn)
                return True
        return False
