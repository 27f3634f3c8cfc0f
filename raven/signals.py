"""Stop signals as events: SIGTERM, SIGHUP (and SIGINT where asked) stop work cleanly.

Installs loop signal handlers for the duration of a `with` block and remembers
which signal arrived, so the process can exit 128 + its number. Never exits by itself.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable, Iterable
from types import TracebackType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class StopSignals:
    """Calls `on_stop(signum)` (its result ignored) when one of `signals` arrives, in the block."""

    def __init__(
        self, on_stop: Callable[[int], object], signals: Iterable[int] = STOP_SIGNALS
    ) -> None:
        self._on_stop = on_stop
        self._signals = tuple(signals)
        self.received: int | None = None

    @property
    def exit_code(self) -> int | None:
        """128 + the signal's number, as shells report a process a signal stopped."""
        return None if self.received is None else 128 + self.received

    def _handle(self, signum: int) -> None:
        if self.received is None or signum != signal.SIGINT:
            self.received = signum
        self._on_stop(signum)

    def __enter__(self) -> StopSignals:
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            loop.add_signal_handler(sig, self._handle, sig)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            loop.remove_signal_handler(sig)


async def until_stopped(signals: Iterable[int] = (signal.SIGINT, signal.SIGTERM)) -> int:
    """Wait for one of `signals` (a server's foreground life); the signal that arrived."""
    stopped = asyncio.Event()
    with StopSignals(lambda _: stopped.set(), signals) as received:
        await stopped.wait()
    assert received.received is not None
    return received.received
