"""Names under which MCP tools are offered to the model. Pure functions."""

from __future__ import annotations

import hashlib
import re

MAX_NAME_CHARS = 64
_INVALID = re.compile(r"[^A-Za-z0-9_-]")


def model_tool_name(server: str, tool: str, taken: set[str]) -> str:
    """`server__tool`, cut to the providers' rules (`[A-Za-z0-9_-]{1,64}`) and unique in `taken`."""
    name = _INVALID.sub("_", f"{server}__{tool}")
    if len(name) > MAX_NAME_CHARS or name in taken:
        digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:8]
        name = f"{name[: MAX_NAME_CHARS - 9]}_{digest}"
    return name
