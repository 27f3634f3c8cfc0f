"""The PostgreSQL store's own connection pool, against a real server: bounded, fair to
those waiting, and never handing out a connection a statement may have left half-done."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from raven.sessions.pg_connections import Connections

DEADLINE_S = 10.0


async def test_at_most_size_are_open_and_a_waiter_gets_the_one_given_back(pg_url: str) -> None:
    pool = Connections(pg_url, 2, DEADLINE_S, DEADLINE_S)
    first, second = await pool.acquire(DEADLINE_S), await pool.acquire(DEADLINE_S)
    with pytest.raises(TimeoutError):  # both in use: none within the deadline
        await pool.acquire(0.05)
    third = asyncio.ensure_future(pool.acquire(DEADLINE_S))  # waits for one given back
    pool.release(first, reuse=True)
    assert await asyncio.wait_for(third, DEADLINE_S) is first  # handed on, not reopened
    assert await first.fetchval("SELECT 1") == 1
    for conn in (first, second):
        pool.release(conn, reuse=True)
    await pool.aclose(DEADLINE_S)
    assert first.is_closed() and second.is_closed()


async def test_a_connection_not_to_be_reused_is_closed_and_its_place_given_to_a_waiter(
    pg_url: str,
) -> None:
    pool = Connections(pg_url, 1, DEADLINE_S, DEADLINE_S)
    only = await pool.acquire(DEADLINE_S)
    waiting = asyncio.ensure_future(pool.acquire(DEADLINE_S))
    pool.release(only, reuse=False)  # a cancel may have left a statement half-done on it
    fresh = await asyncio.wait_for(waiting, DEADLINE_S)
    assert only.is_closed() and fresh is not only
    assert await fresh.fetchval("SELECT 2") == 2
    pool.release(fresh, reuse=True)
    await pool.aclose(DEADLINE_S)


async def test_a_connection_the_server_dropped_is_not_handed_out_again(pg_url: str) -> None:
    pool = Connections(pg_url, 2, DEADLINE_S, DEADLINE_S)
    doomed = await pool.acquire(DEADLINE_S)
    pid = doomed.get_server_pid()
    killer = await asyncpg.connect(pg_url)
    try:
        assert await killer.fetchval("SELECT pg_terminate_backend($1)", pid)
    finally:
        await killer.close()
    async with asyncio.timeout(DEADLINE_S):  # the client hears the server hang up
        while not doomed.is_closed():
            await asyncio.sleep(0.01)
    pool.release(doomed, reuse=True)  # its user thought it sound: it is dropped all the same
    again = await pool.acquire(DEADLINE_S)
    assert again is not doomed and await again.fetchval("SELECT 3") == 3
    pool.release(again, reuse=True)
    await pool.aclose(DEADLINE_S)
