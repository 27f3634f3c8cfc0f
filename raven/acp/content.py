"""What an editor sends, as Raven's own values: prompt blocks as parts, MCP entries as specs.

Pure conversions of parsed ACP params; no I/O.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from pydantic import ValidationError

from raven.acp import protocol as p
from raven.config import McpStdioServer
from raven.jsonrpc import INVALID_PARAMS, RpcError
from raven.messages import ImagePart, Part, TextPart

log = logging.getLogger(__name__)


def prompt_parts(blocks: list[p.ContentBlock]) -> list[Part]:
    parts: list[Part] = []
    for block in blocks:
        if isinstance(block, p.TextContent):
            parts.append(TextPart(text=block.text))
        elif isinstance(block, p.ImageContent):
            parts.append(ImagePart(data=block.data, mime_type=block.mime_type))
        elif isinstance(block, p.ResourceLink):
            label = block.title or block.name
            note = f" ({block.description})" if block.description else ""
            parts.append(TextPart(text=f"[{label}]({block.uri}){note}"))
        elif isinstance(block, p.EmbeddedResource):
            res = block.resource
            if res.text is not None:
                parts.append(TextPart(text=f'<resource uri="{res.uri}">\n{res.text}\n</resource>'))
            else:
                parts.append(
                    TextPart(text=f"[binary resource {res.uri} ({res.mime_type}) not shown]")
                )
        else:
            raise RpcError(INVALID_PARAMS, "Audio prompts are not supported")
    if not parts:
        raise RpcError(INVALID_PARAMS, "The prompt is empty")
    return parts


def title_command(parts: list[Part]) -> str | None:
    if len(parts) != 1 or not isinstance(parts[0], TextPart):
        return None
    text = parts[0].text.strip()
    if not text.startswith("/title "):
        return None
    return text.removeprefix("/title ").strip() or None


def stdio_specs(servers: list[dict[str, Any]]) -> list[McpStdioServer]:
    """The usable entries of an ACP `mcpServers` list; others are dropped with a warning."""
    specs: list[McpStdioServer] = []
    for entry in servers:
        if entry.get("type") in ("http", "sse"):
            log.warning(
                "MCP server %r: %s transport is not offered; dropped",
                entry.get("name"),
                entry.get("type"),
            )
            continue
        try:
            server = p.McpServerStdio.model_validate(entry)
            specs.append(
                McpStdioServer(
                    name=re.sub(r"[^A-Za-z0-9_.-]", "_", server.name) or "mcp",
                    command=server.command,
                    args=server.args,
                    env={e.name: e.value for e in server.env},
                )
            )
        except ValidationError as exc:
            log.warning("MCP server entry %r is unusable and dropped: %s", entry.get("name"), exc)
    return specs
