"""The store's own thread: runs store calls off the event loop, several per wake-up.

Under load many sessions commit at once. The worker drains its queue in one
wake-up, runs the batch inside `group` (one transaction: group commit), and
answers each event loop once per batch. No caller hears of success before the
batch is committed. Never runs anything but the callables it is given, in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
MAX_BATCH = 64

_Job = tuple[Callable[[], Any], asyncio.Future[Any] | None, asyncio.AbstractEventLoop | None]


class StoreWorker:
    def __init__(
        self,
        group: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
        name: str = "raven-store",
    ) -> None:
        self._group = group
        self._queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._name = name
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pending = 0
        self._posted = 0
        self._ran = 0
        """Posted jobs, and those the thread has run (each counted by one thread only)."""

    @property
    def idle(self) -> bool:
        """No call or posted job is queued or running: one made now would be next in line."""
        return self._pending == 0 and self._ran == self._posted

    async def call(self, fn: Callable[[], T]) -> T:
        """`fn()` on the worker thread; its result or exception, awaited here."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        self._ensure_thread()
        self._pending += 1
        try:
            self._queue.put((fn, future, loop))
            return await future
        finally:
            self._pending -= 1

    def wake(self) -> None:
        """Run an empty batch soon (whatever `group` does around every batch), unawaited."""
        self.post(_nothing)

    def post(self, fn: Callable[[], object]) -> None:
        """`fn()` on the worker thread soon, unawaited (an exception it raises is lost:
        `fn` handles its own)."""
        self._ensure_thread()
        self._posted += 1
        self._queue.put((fn, None, None))

    def stop(self) -> None:
        """Finish queued calls and end the thread."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None:
            self._queue.put(None)
            thread.join()

    def _ensure_thread(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()

    def _run(self) -> None:
        while (job := self._queue.get()) is not None:
            batch = [job]
            while len(batch) < MAX_BATCH:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)
                    break
                batch.append(nxt)
            outcomes: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], bool, Any]]]
            outcomes = {}
            try:
                with self._group():
                    for fn, future, loop in batch:
                        ok, value = True, None
                        try:
                            value = fn()
                        except Exception as exc:  # handed to the awaiting task, never lost
                            ok, value = False, exc
                        if future is not None and loop is not None:
                            outcomes.setdefault(loop, []).append((future, ok, value))
            except Exception as exc:  # the batch did not commit: nothing in it happened
                outcomes = {}
                for _, future, loop in batch:
                    if future is not None and loop is not None:
                        outcomes.setdefault(loop, []).append((future, False, exc))
            self._ran += sum(1 for _, future, _ in batch if future is None)
            for loop, results in outcomes.items():
                try:
                    loop.call_soon_threadsafe(_settle, results)
                except RuntimeError:
                    pass  # that event loop is closed; nobody awaits these any more


def _nothing() -> None:
    return None


def _settle(results: list[tuple[asyncio.Future[Any], bool, Any]]) -> None:
    for future, ok, value in results:
        if future.done():
            continue
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)
