"""The `a2a_send` tool and the tool source that offers it when peers are configured."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from pydantic import Field

from raven.config import A2AConfig
from raven.tools import Preview, Tool, ToolContext, ToolError, ToolKind, ToolOutput
from raven.tools.base import Args, BuiltinTool

INBOX = "a2a-inbox"
"""Under the session's working directory: where files peers send back are saved."""


class A2ASendArgs(Args):
    card_url: str = Field(description="URL of the peer's agent card (.well-known/agent-card.json)")
    message: str = Field(min_length=1, description="What to ask the peer")
    task_id: str | None = Field(default=None, description="Continue (answer) this peer task")
    context_id: str | None = Field(default=None, description="Continue this peer conversation")
    files: list[str] = Field(
        default_factory=list,
        description="Files inside the working directory to send along (relative paths)",
    )


class A2ASendTool(BuiltinTool):
    name: ClassVar[str] = "a2a_send"
    description: ClassVar[str] = (
        "Ask a remote A2A agent to do something and return its answer. When the peer asks "
        "a question (input-required), answer it by calling a2a_send again with its task_id."
    )
    kind: ClassVar[ToolKind] = "fetch"
    args_model = A2ASendArgs

    def __init__(self, settings: A2AConfig) -> None:
        self._settings = settings

    def title(self, args: A2ASendArgs, ctx: ToolContext) -> str:
        """Names every file that would leave the machine, so the approval shows them."""
        sending = f", sending {', '.join(args.files)}" if args.files else ""
        return f"Ask A2A peer {args.card_url}{sending}"

    def locations(self, args: A2ASendArgs, ctx: ToolContext) -> list[Path]:
        """The files to send, refused before approval when one is outside the cwd."""
        return [ctx.inside(f, "nothing was sent") for f in args.files]

    async def preview(self, args: A2ASendArgs, ctx: ToolContext) -> Preview | None:
        """What leaves the machine: the message, and each file with its size."""
        lines = [f"to {args.card_url}:", *(f"  {line}" for line in args.message.splitlines())]
        for name, path in zip(args.files, self.locations(args, ctx), strict=True):
            size = path.stat().st_size if path.is_file() else 0
            lines.append(f"sending {name} ({size} bytes)")
        return "\n".join(lines)

    async def run(self, args: A2ASendArgs, ctx: ToolContext) -> ToolOutput:
        from raven.a2a_client.send import PeerError, send_message

        files = self.locations(args, ctx)  # again: a link may have changed since approval
        try:
            reply = await send_message(
                args.card_url,
                args.message,
                self._settings.peers,
                self._settings.client,
                args.task_id,
                args.context_id,
                files=files,
                inbox=ctx.cwd / INBOX,
            )
        except PeerError as exc:
            raise ToolError(str(exc)) from None
        received = "".join(f"\n[{line}]" for line in reply.received)
        if reply.state in ("input-required", "auth-required"):
            return ToolOutput(
                f"The peer needs input ({reply.state}) and asks:\n{reply.text}{received}\n\n"
                f"To answer, call a2a_send again with task_id={reply.task_id!r} "
                f"and context_id={reply.context_id!r}."
            )
        ids = (
            f"\n\n[task_id={reply.task_id}, context_id={reply.context_id}]" if reply.task_id else ""
        )
        return ToolOutput(f"{reply.text or '(the peer returned no text)'}{received}{ids}")


class A2ASendSource:
    """Offers `a2a_send` to every session; needs no connection."""

    def __init__(self, settings: A2AConfig) -> None:
        self._tools: list[Tool] = [A2ASendTool(settings)]

    async def tools(self) -> tuple[list[Tool], list[str]]:
        return self._tools, []

    async def release(self, session_id: str) -> None:
        return None

    async def aclose(self) -> None:
        return None
