from __future__ import annotations

import asyncio
import threading

import pytest

from raven.sessions.worker import StoreWorker


async def test_calls_run_off_the_loop_in_order_and_return_results() -> None:
    worker = StoreWorker()
    seen: list[int] = []
    loop_thread = threading.get_ident()

    def record(n: int) -> int:
        assert threading.get_ident() != loop_thread
        seen.append(n)
        return n * 2

    results = await asyncio.gather(*(worker.call(lambda n=n: record(n)) for n in range(100)))
    worker.stop()
    assert results == [n * 2 for n in range(100)] and seen == list(range(100))


async def test_exceptions_reach_the_caller() -> None:
    worker = StoreWorker()

    def fail() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError):
        await worker.call(fail)
    assert await worker.call(lambda: "still working") == "still working"
    worker.stop()


async def test_grouped_writes_fail_alone_and_land_together(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from raven.messages import user_text
    from raven.sessions import SessionNotFound, SqliteStore

    store = SqliteStore(tmp_path / "raven.db")
    record = store.create("/w", face="test")
    calls = [store.call(store.append, record.id, user_text(f"m{i}")) for i in range(20)]
    calls.insert(10, store.call(store.append, "ses_missing", user_text("lost")))
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert [type(r) for r in results].count(SessionNotFound) == 1
    assert [m.text for m in store.messages(record.id)] == [f"m{i}" for i in range(20)]  # type: ignore[union-attr]
    store.close()
