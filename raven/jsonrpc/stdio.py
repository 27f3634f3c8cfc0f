"""Asyncio streams over two file descriptors: pipes, sockets and ttys, or anything else.

Plain files and character devices other than ttys (`/dev/null`) cannot be watched
by the event loop, so they are served by a thread; end of input ends the reader
whatever the descriptor is.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import threading
from collections.abc import Awaitable, Callable

from raven.jsonrpc.framing import READ_LIMIT_BYTES

WriteFn = Callable[[bytes], Awaitable[None]]


def reserve_stdout() -> int:
    """A private duplicate of fd 1 for frames; fd 1 and sys.stdout now go to stderr, so a
    stray print or a library's output can never corrupt the protocol stream."""
    frames_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return frames_fd


async def open_stdio(in_fd: int, out_fd: int) -> tuple[asyncio.StreamReader, WriteFn]:
    """A reader for `in_fd` and an awaitable write function for `out_fd`."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_LIMIT_BYTES)
    if not _pollable(in_fd):
        threading.Thread(target=_pump, args=(loop, in_fd, reader), daemon=True).start()
    else:
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(in_fd, "rb", 0, closefd=False)
        )
    if not _pollable(out_fd):

        async def write_file(data: bytes) -> None:
            await asyncio.to_thread(os.write, out_fd, data)

        return reader, write_file
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(out_fd, "wb", 0, closefd=False)
    )
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)

    async def write_pipe(data: bytes) -> None:
        writer.write(data)
        await writer.drain()

    return reader, write_pipe


def _pollable(fd: int) -> bool:
    """Whether the event loop can watch `fd`: a pipe, a socket or a terminal."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)


def _pump(loop: asyncio.AbstractEventLoop, fd: int, reader: asyncio.StreamReader) -> None:
    while chunk := os.read(fd, 65536):
        loop.call_soon_threadsafe(reader.feed_data, chunk)
    loop.call_soon_threadsafe(reader.feed_eof)
