"""JSON-RPC 2.0 over a byte-stream pair, newline-delimited: the layer under ACP.

Shared by the ACP server and the ACP client. Knows no ACP method and never
touches sys.stdout; whoever owns the process hands it the streams.
"""

from raven.jsonrpc.connection import Connection, ConnectionClosed, Dispatcher
from raven.jsonrpc.errors import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    RpcError,
)
from raven.jsonrpc.framing import MAX_FRAME_BYTES, FrameReader, FrameTooLarge
from raven.jsonrpc.stdio import open_stdio

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MAX_FRAME_BYTES",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
    "Connection",
    "ConnectionClosed",
    "Dispatcher",
    "FrameReader",
    "FrameTooLarge",
    "RpcError",
    "open_stdio",
]
