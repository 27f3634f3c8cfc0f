"""The floor for bench/acp.py: a minimal echo agent on the official ACP Python SDK."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import acp
from acp import schema


class EchoAgent:
    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> schema.InitializeResponse:
        return schema.InitializeResponse(protocol_version=1)

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        return schema.NewSessionResponse(session_id=uuid.uuid4().hex)

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> Any:
        text = " ".join(getattr(block, "text", "") for block in prompt)
        for word in text.split(" "):
            await self.conn.session_update(session_id, acp.update_agent_message_text(word + " "))
        return schema.PromptResponse(stop_reason="end_turn")


if __name__ == "__main__":
    asyncio.run(acp.run_agent(EchoAgent()))
