"""JSON-RPC error codes and the one error type that carries them on the wire."""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
REQUEST_CANCELLED = -32800


class RpcError(Exception):
    """An error response, sent to the peer as is, or received from it."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_wire(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error

    @classmethod
    def from_wire(cls, error: Any) -> RpcError:
        if isinstance(error, dict):
            code = error.get("code")
            return cls(
                code if isinstance(code, int) else INTERNAL_ERROR,
                str(error.get("message", "error")),
                error.get("data"),
            )
        return cls(INTERNAL_ERROR, "malformed error response")
