"""The `a2a` tool a sub-agent asks its siblings with: one tool, an `action` argument.

The same tool reaches every child: through the MCP server Raven gives it
(`raven.broker.mcp_server`), or natively in a child Raven (`broker_tools`). Both call the
broker over its channel with the token the host minted for the child, which never
appears in the tool's arguments, its description or its results.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from raven.broker.channel import ask, refused, shown
from raven.broker.task import BrokerError
from raven.tools import ToolContext, ToolError, ToolKind, ToolOutput
from raven.tools.base import Args, BuiltinTool, FixedTools

NAME = "a2a"
DESCRIPTION = (
    "Ask the other agents working for the same person for work, and answer what they ask "
    "you. Actions: `discover` lists whom you may ask; `send` with `to` and `text` gives "
    "one of them a task, with `task_id` and `text` adds a message to a task (the asker "
    "following up, or the worker asking something back: the task waits on the asker); "
    "`get` shows a task; `wait` waits for it to need you (up to `timeout_s`, 30 by "
    "default, 120 at most); `complete` ends a task you work on with your answer "
    "(`outcome` completed, failed or rejected); `cancel` withdraws a task you gave. "
    "send waits like wait. A task you are given arrives as a message naming its task_id; "
    "your reply to that message is its answer unless you complete it yourself."
)


class A2AArgs(Args):
    action: Literal["discover", "send", "get", "wait", "complete", "cancel"]
    to: str | None = Field(default=None, description="send: the agent to give a new task")
    task_id: str | None = Field(default=None, description="The task (all but discover)")
    text: str | None = Field(default=None, description="send: the message; complete: the answer")
    needs: Literal["input", "auth"] | None = Field(
        default=None, description="send by a task's worker: what it waits on the asker for"
    )
    outcome: Literal["completed", "failed", "rejected"] | None = Field(
        default=None, description="complete: how the task ended (completed)"
    )
    timeout_s: float | None = Field(default=None, ge=0, description="send, wait: seconds")


def mcp_tool() -> dict[str, Any]:
    """The tool as an MCP server lists it (`a2a_tool.json`, which `mcp_server` serves)."""
    return {"name": NAME, "description": DESCRIPTION, "inputSchema": A2ATool("", "").parameters()}


def arguments(args: A2AArgs) -> tuple[str, dict[str, Any]]:
    """The action and its arguments as the channel takes them."""
    given = args.model_dump(exclude_none=True)
    return given.pop("action"), given


class A2ATool(BuiltinTool):
    name: ClassVar[str] = NAME
    description: ClassVar[str] = DESCRIPTION
    kind: ClassVar[ToolKind] = "other"
    needs_approval: ClassVar[bool] = False
    args_model = A2AArgs

    def __init__(self, socket: str, token: str) -> None:
        self._socket = socket
        self._token = token

    def title(self, args: A2AArgs, ctx: ToolContext) -> str:
        about = args.to or args.task_id or ""
        return f"a2a {args.action} {about}".strip()

    async def run(self, args: A2AArgs, ctx: ToolContext) -> ToolOutput:
        action, given = arguments(args)
        try:
            return ToolOutput(shown(await ask(self._socket, self._token, action, given)))
        except BrokerError as exc:
            raise ToolError(refused(exc)) from None
        except OSError as exc:
            raise ToolError(f"the broker cannot be reached: {exc}") from None


def broker_tools(socket: str, token: str) -> FixedTools:
    """The tool source of a child Raven whose parent gave it the broker."""
    return FixedTools(A2ATool(socket, token))
