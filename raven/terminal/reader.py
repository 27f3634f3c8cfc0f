"""Lines from the terminal (or any file descriptor) read without blocking the event loop.

One pump per descriptor; never prints.
"""

from __future__ import annotations

import asyncio
import os
import sys


class LineReader:
    """Reads lines from a file descriptor without blocking the event loop.

    Several readers may wait at once (a chat's prompt, and a question a turn asks
    meanwhile): the fd has one pump, and each line goes to the newest reader still
    waiting, so the question gets the answer and the prompt the line after.
    """

    def __init__(self, fd: int = 0) -> None:
        self._fd = fd
        self._buffer = b""
        self._eof = False
        self._waiters: list[asyncio.Future[str | None]] = []
        self._pump: asyncio.Task[None] | None = None

    async def readline(self) -> str | None:
        """The next line without its newline; None at end of input."""
        if (line := self._take()) is not None or self._eof:
            return line
        waiter: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        if self._pump is None or self._pump.done():
            self._pump = asyncio.create_task(self._run_pump())
        try:
            return await waiter
        finally:
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def _take(self) -> str | None:
        """A whole line from the buffer (the rest of it at end of input), if there is one."""
        if b"\n" not in self._buffer and not (self._eof and self._buffer):
            return None
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode("utf-8", "replace").rstrip("\r")

    async def _run_pump(self) -> None:
        while self._waiters and not self._eof:
            try:
                chunk = await self._read_chunk()
            except OSError:  # the terminal went away (EIO): that is the end of input
                chunk = b""
            self._eof = not chunk
            self._buffer += chunk
            while self._someone_waits() and (line := self._take()) is not None:
                self._waiters.pop().set_result(line)
        if self._eof:
            while self._someone_waits():
                self._waiters.pop().set_result(None)

    def _someone_waits(self) -> bool:
        """Whether a reader waits; the newest then ends the list (those that gave up leave)."""
        while self._waiters and self._waiters[-1].done():
            self._waiters.pop()
        return bool(self._waiters)

    async def _read_chunk(self) -> bytes:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()

        def readable() -> None:
            if not ready.done():
                ready.set_result(None)

        try:
            loop.add_reader(self._fd, readable)
        except (PermissionError, ValueError, OSError):
            return await asyncio.to_thread(os.read, self._fd, 65536)
        try:
            await ready
        finally:
            loop.remove_reader(self._fd)
        return os.read(self._fd, 65536)


def stdin_is_terminal() -> bool:
    return sys.stdin.isatty()
