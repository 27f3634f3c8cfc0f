"""`attach_file`: in an A2A turn, the model hands the peer a file as an artifact of the task.

Offered only in A2A turns. Reads only inside the task's working directory, up to
`a2a.server.maxFileBytes`; never sends anything itself (the task's end does).
"""

from __future__ import annotations

import mimetypes
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from a2a.types import Part
from pydantic import Field

from raven.tools import ToolContext, ToolError, ToolKind, ToolOutput
from raven.tools.base import Args, BuiltinTool, FixedTools

Attach = Callable[[str, Part], bool]
"""Adds a part to the running task of a session; False when the session has none."""


class AttachArgs(Args):
    path: str = Field(description="File in the working directory to send back to the peer")
    name: str | None = Field(default=None, description="Name the peer sees (default: its own)")


class AttachFile(BuiltinTool):
    name: ClassVar[str] = "attach_file"
    description: ClassVar[str] = (
        "Send a file from the working directory back to the agent that asked for this task; "
        "it arrives with your answer as a file artifact."
    )
    kind: ClassVar[ToolKind] = "read"
    needs_approval: ClassVar[bool] = False
    args_model = AttachArgs

    def __init__(self, attach: Attach, max_bytes: int) -> None:
        self._attach = attach
        self._max_bytes = max_bytes

    def title(self, args: AttachArgs, ctx: ToolContext) -> str:
        return f"Attach {args.path}"

    def locations(self, args: AttachArgs, ctx: ToolContext) -> list[Path]:
        return [ctx.inside(args.path, "not attached")]

    async def run(self, args: AttachArgs, ctx: ToolContext) -> ToolOutput:
        path = ctx.inside(args.path, "not attached")
        if not path.is_file():
            raise ToolError(f"{args.path}: no such file")
        size = path.stat().st_size
        if size > self._max_bytes:
            raise ToolError(
                f"{args.path} is {size} bytes, over a2a.server.maxFileBytes "
                f"({self._max_bytes} bytes); not attached"
            )
        name = args.name or path.name
        media_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
        part = Part(raw=path.read_bytes(), filename=name, media_type=media_type)
        if not self._attach(ctx.session_id, part):
            raise ToolError("there is no task to attach the file to")
        return ToolOutput(f"Attached {name} ({media_type}, {size} bytes); the peer gets it.")


def attach_source(attach: Attach, max_bytes: int) -> FixedTools:
    """Offers `attach_file` to the A2A sessions."""
    return FixedTools(AttachFile(attach, max_bytes))
