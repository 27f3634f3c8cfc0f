"""Running the ACP server on this process's stdin and stdout.

Moves the real stdout aside for frames and points fd 1 at stderr, so a stray
print or a library's output can never corrupt the protocol stream. Every frame
sent to the editor passes through redaction, whatever it carries.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from raven.acp.lazy import LazyServer
from raven.jsonrpc import Connection, FrameReader, open_stdio
from raven.redact import redact_json
from raven.signals import StopSignals

if TYPE_CHECKING:
    from raven.engine import Runtime

log = logging.getLogger(__name__)

SHUTDOWN_TIMEOUT_S = 3.5


async def serve_stdio(runtime_factory: Callable[[], Runtime], frames_fd: int) -> int:
    """Serve ACP until stdin closes or SIGTERM/SIGHUP, then cancel turns and release everything.

    Returns the exit code: 0 after end of input, 128 + the signal's number after a signal.
    """
    reader, write = await open_stdio(0, frames_fd)
    server = LazyServer(runtime_factory)
    connection = Connection(FrameReader(reader), write, server, outbound=redact_json)
    server.attach(connection)
    log.info("raven acp started (pid %d)", os.getpid())
    serving = asyncio.create_task(connection.serve())
    try:
        with StopSignals(lambda _: serving.cancel()) as signals:
            with contextlib.suppress(asyncio.CancelledError):
                await serving
            if signals.received is None:
                log.info("stdin closed; shutting down")
            else:
                log.info("signal %d; shutting down", signals.received)
            await server.shutdown()
            await connection.finish(SHUTDOWN_TIMEOUT_S)
    finally:
        await server.aclose()
    return signals.exit_code or 0
