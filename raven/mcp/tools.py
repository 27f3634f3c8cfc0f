"""MCP tools and resources adapted to Raven's tool protocol."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from raven.messages import ImagePart
from raven.tools import Preview, ToolContext, ToolError, ToolKind, ToolOutput

if TYPE_CHECKING:
    from raven.mcp.server import McpServer


class PassThroughArgs(BaseModel):
    """MCP arguments are checked by the server against its own schema."""

    model_config = ConfigDict(extra="allow")


class McpTool:
    kind: ClassVar[ToolKind] = "other"
    needs_approval: ClassVar[bool] = True
    args_model: ClassVar[type[BaseModel]] = PassThroughArgs

    def __init__(
        self,
        server: McpServer,
        name: str,
        remote_name: str,
        description: str,
        schema: dict[str, Any],
    ) -> None:
        self.name = name
        self.remote_name = remote_name
        self.server_name = server.name
        self.description = f"[{server.name}] {description}".strip()
        self._server = server
        self._schema = schema

    def parameters(self) -> dict[str, Any]:
        return self._schema

    def title(self, args: PassThroughArgs, ctx: ToolContext) -> str:
        return f"{self._server.name}: {self.remote_name}"

    def locations(self, args: PassThroughArgs, ctx: ToolContext) -> list[Path]:
        return []

    async def preview(self, args: PassThroughArgs, ctx: ToolContext) -> Preview | None:
        return None  # the server's tool: its arguments are what the person can judge

    async def run(self, args: PassThroughArgs, ctx: ToolContext) -> ToolOutput:
        result = await self._server.call_tool(
            self.remote_name, args.model_dump(), ctx.limits.command_timeout_s
        )
        return tool_output(result)


class ReadResourceArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    server: str = Field(description="Name of the MCP server that offers the resource")
    uri: str = Field(description="The resource URI")


class ReadResource:
    """`read_resource(server, uri)` over the servers of one scope that offer resources."""

    name: ClassVar[str] = "read_resource"
    kind: ClassVar[ToolKind] = "read"
    needs_approval: ClassVar[bool] = False
    args_model: ClassVar[type[BaseModel]] = ReadResourceArgs

    def __init__(self, servers: dict[str, McpServer]) -> None:
        self._servers = servers
        listing = "; ".join(f"{name}: {s.resource_summary()}" for name, s in servers.items())
        self.description = f"Read a resource from an MCP server. Servers and resources: {listing}"

    def parameters(self) -> dict[str, Any]:
        schema = ReadResourceArgs.model_json_schema()
        schema.pop("title", None)
        return schema

    def title(self, args: ReadResourceArgs, ctx: ToolContext) -> str:
        return f"Read {args.uri} from {args.server}"

    async def preview(self, args: ReadResourceArgs, ctx: ToolContext) -> Preview | None:
        return None

    def locations(self, args: ReadResourceArgs, ctx: ToolContext) -> list[Path]:
        return []

    async def run(self, args: ReadResourceArgs, ctx: ToolContext) -> ToolOutput:
        server = self._servers.get(args.server)
        if server is None:
            raise ToolError(
                f"no MCP server {args.server!r} offers resources; "
                f"try one of: {', '.join(self._servers)}"
            )
        return await server.read_resource(args.uri, ctx.limits.command_timeout_s)


def tool_output(result: Any) -> ToolOutput:
    """A `CallToolResult` as text for the model, with images kept aside."""
    texts: list[str] = []
    images: list[ImagePart] = []
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            texts.append(block.text)
        elif kind == "image":
            images.append(ImagePart(data=block.data, mime_type=block.mime_type))
            texts.append(f"[image {block.mime_type}]")
        elif kind == "resource":
            resource = block.resource
            texts.append(getattr(resource, "text", None) or f"[resource {resource.uri}]")
        elif kind == "resource_link":
            texts.append(f"[resource {block.uri}]")
        else:
            texts.append(f"[{kind or 'unknown'} content]")
    structured = getattr(result, "structured_content", None)
    if structured is not None and not texts:
        texts.append(json.dumps(structured, ensure_ascii=False))
    text = "\n".join(texts) or "(no output)"
    return ToolOutput(text, is_error=bool(result.is_error), images=tuple(images))
