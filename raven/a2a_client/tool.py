"""The `a2a_send` tool and the tool source that offers it when peers are configured."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from raven.config import A2AConfig, AgentSpec
from raven.tools import Preview, Tool, ToolContext, ToolError, ToolKind, ToolOutput
from raven.tools.base import Args, BuiltinTool

if TYPE_CHECKING:
    from raven.a2a_client.stdio import StdioAgents

INBOX = "a2a-inbox"
"""Under the session's working directory: where files peers send back are saved."""


class A2ASendArgs(Args):
    card_url: str | None = Field(
        default=None, description="URL of the peer's agent card (.well-known/agent-card.json)"
    )
    agent: str | None = Field(
        default=None,
        description="Instead of card_url: the name of a local A2A agent Raven starts itself",
    )
    message: str = Field(min_length=1, description="What to ask the peer")
    task_id: str | None = Field(default=None, description="Continue (answer) this peer task")
    context_id: str | None = Field(default=None, description="Continue this peer conversation")
    files: list[str] = Field(
        default_factory=list,
        description="Files inside the working directory to send along (relative paths)",
    )

    @model_validator(mode="after")
    def _one_peer(self) -> A2ASendArgs:
        if (self.card_url is None) == (self.agent is None):
            raise ValueError("give either card_url (a remote peer) or agent (a local one)")
        return self

    @property
    def peer(self) -> str:
        """The peer, as a person reads it."""
        return f"local agent {self.agent}" if self.agent is not None else f"{self.card_url}"


class RemoteSendArgs(A2ASendArgs):
    """With no local agent configured: the card URL, as the model must give it."""

    card_url: str = Field(description="URL of the peer's agent card (.well-known/agent-card.json)")
    agent: SkipJsonSchema[None] = None


class A2ASendTool(BuiltinTool):
    name: ClassVar[str] = "a2a_send"
    description: ClassVar[str] = (
        "Ask a remote A2A agent to do something and return its answer. When the peer asks "
        "a question (input-required), answer it by calling a2a_send again with its task_id."
    )
    kind: ClassVar[ToolKind] = "fetch"
    args_model: ClassVar[type[BaseModel]] = RemoteSendArgs

    def __init__(self, settings: A2AConfig, agents: StdioAgents) -> None:
        self._settings = settings
        self._agents = agents

    def title(self, args: A2ASendArgs, ctx: ToolContext) -> str:
        """Names every file that would leave the machine, so the approval shows them."""
        sending = f", sending {', '.join(args.files)}" if args.files else ""
        if args.agent is not None:
            return f"Ask local A2A agent {args.agent}{sending}"
        return f"Ask A2A peer {args.card_url}{sending}"

    def locations(self, args: A2ASendArgs, ctx: ToolContext) -> list[Path]:
        """The files to send, refused before approval when one is outside the cwd."""
        return [ctx.inside(f, "nothing was sent") for f in args.files]

    async def preview(self, args: A2ASendArgs, ctx: ToolContext) -> Preview | None:
        """What leaves the machine: the message, and each file with its size."""
        lines = [f"to {args.peer}:", *(f"  {line}" for line in args.message.splitlines())]
        for name, path in zip(args.files, self.locations(args, ctx), strict=True):
            size = path.stat().st_size if path.is_file() else 0
            lines.append(f"sending {name} ({size} bytes)")
        return "\n".join(lines)

    async def run(self, args: A2ASendArgs, ctx: ToolContext) -> ToolOutput:
        from raven.a2a_client.send import PeerError, send_message

        files = self.locations(args, ctx)  # again: a link may have changed since approval
        try:
            if args.agent is not None:
                spec = self._agents.specs.get(args.agent)
                cwd = ctx.resolve(spec.cwd) if spec is not None and spec.cwd else ctx.cwd
                reply = await self._agents.send(
                    ctx.session_id,
                    args.agent,
                    cwd,
                    args.message,
                    args.task_id,
                    args.context_id,
                    files=files,
                    inbox=ctx.cwd / INBOX,
                )
            else:
                assert args.card_url is not None
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


class LocalOrRemoteSendTool(A2ASendTool):
    """`a2a_send` when local A2A agents are configured: a card URL or an agent's name."""

    args_model: ClassVar[type[BaseModel]] = A2ASendArgs
    _schema: ClassVar[dict[str, Any] | None] = None  # its own, not A2ASendTool's

    def __init__(self, settings: A2AConfig, agents: StdioAgents) -> None:
        super().__init__(settings, agents)
        names = ", ".join(agents.specs)
        local = f" Local A2A agents (agent=): {names}."
        self.description = A2ASendTool.description + local  # type: ignore[misc]


class A2ASendSource:
    """Offers `a2a_send` to every session; the local A2A agents a session asked run until
    it is released."""

    def __init__(self, settings: A2AConfig, agents: Sequence[AgentSpec] = ()) -> None:
        from raven.a2a_client.stdio import StdioAgents

        self._agents = StdioAgents(agents, settings.client)
        tool = LocalOrRemoteSendTool if self._agents.specs else A2ASendTool
        self._tools: list[Tool] = [tool(settings, self._agents)]

    async def tools(self) -> tuple[list[Tool], list[str]]:
        return self._tools, []

    async def release(self, session_id: str) -> None:
        await self._agents.release(session_id)

    async def aclose(self) -> None:
        await self._agents.aclose()
