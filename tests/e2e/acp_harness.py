"""Drives `raven acp` as an editor would: the official ACP SDK client over real pipes.

Every line Raven writes to stdout is recorded raw and, at the end, checked to be
JSON-RPC and validated against the Python SDK's schema models and the pinned schema the
TypeScript SDK reads (`tests.acp_schema`: stable v1, unstable where it was negotiated).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import acp
from acp import schema
from acp.connection import StreamDirection, StreamEvent
from pydantic import TypeAdapter

from tests.acp_schema import AcpSchema, Version
from tests.conftest import RAVEN

RESPONSE_MODELS: dict[str, Any] = {
    "initialize": schema.InitializeResponse,
    "session/new": schema.NewSessionResponse,
    "session/load": schema.LoadSessionResponse,
    "session/resume": schema.ResumeSessionResponse,
    "session/list": schema.ListSessionsResponse,
    "session/close": schema.CloseSessionResponse,
    "session/delete": schema.DeleteSessionResponse,
    "session/set_mode": schema.SetSessionModeResponse,
    "session/set_config_option": schema.SetSessionConfigOptionResponse,
    "session/prompt": schema.PromptResponse,
}
REQUEST_MODELS: dict[str, Any] = {
    "session/request_permission": TypeAdapter(schema.RequestPermissionRequest),
    "elicitation/create": TypeAdapter(schema.CreateElicitationRequest),
}
PINNED_RESULTS: dict[str, tuple[str, Version]] = {
    "initialize": ("zInitializeResponse", "stable"),
    "authenticate": ("zAuthenticateResponse", "stable"),
    "session/new": ("zNewSessionResponse", "stable"),
    "session/load": ("zLoadSessionResponse", "stable"),
    "session/resume": ("zResumeSessionResponse", "stable"),
    "session/list": ("zListSessionsResponse", "stable"),
    "session/close": ("zCloseSessionResponse", "stable"),
    "session/delete": ("zDeleteSessionResponse", "stable"),
    "session/set_mode": ("zSetSessionModeResponse", "stable"),
    "session/set_config_option": ("zSetSessionConfigOptionResponse", "stable"),
    "session/prompt": ("zPromptResponse", "stable"),
    "session/fork": ("zForkSessionResponse", "unstable"),
}
"""What the pinned schema reads each answer with, by the editor's method."""
PINNED_MESSAGES: dict[str, str] = {
    "session/update": "zSessionNotification",
    "session/request_permission": "zRequestPermissionRequest",
    "elicitation/create": "zCreateElicitationRequest",
    "elicitation/complete": "zCompleteElicitationNotification",
    "$/cancel_request": "zCancelRequestNotification",
}
"""What it reads each of Raven's own requests and notifications with, by method."""
UNSTABLE_UPDATES = frozenset({"subagent_update", "session_message", "session_message_chunk"})
"""Updates only the unstable schema has; Raven sends them to editors that declare them."""


class Editor:
    """The client side: records updates, answers permissions and elicitations from queues."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.permissions: list[schema.RequestPermissionRequest] = []
        self.permission_answers: list[str] = []
        self.elicitations: list[dict[str, Any]] = []
        self.elicitation_answers: list[dict[str, Any]] = []
        self.asked = asyncio.Event()

    async def request_permission(
        self,
        options: list[schema.PermissionOption],
        session_id: str,
        tool_call: schema.ToolCallUpdate,
        **kwargs: Any,
    ) -> schema.RequestPermissionResponse:
        self.permissions.append(
            schema.RequestPermissionRequest(
                session_id=session_id, tool_call=tool_call, options=options
            )
        )
        self.asked.set()
        answer = self.permission_answers.pop(0)
        if answer == "never":
            await asyncio.Event().wait()
        if answer == "error":
            raise acp.RequestError(-32603, "the editor failed")
        if answer == "first allow":  # an editor approving everything on its own
            answer = next((o.option_id for o in options if o.kind.startswith("allow")), "cancelled")
        if answer == "first":  # an editor taking whatever comes first
            answer = options[0].option_id
        if answer == "cancelled":
            return schema.RequestPermissionResponse(
                outcome=schema.DeniedOutcome(outcome="cancelled")
            )
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=answer)
        )

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))

    async def create_elicitation(self, message: str, mode: Any = None, **kwargs: Any) -> Any:
        self.elicitations.append({"message": message, "mode": mode, **kwargs})
        answer = self.elicitation_answers.pop(0)
        return answer

    async def wait_for(self, kind: str, timeout_s: float = 10) -> None:
        """Return once an update of `kind` has arrived."""
        async with asyncio.timeout(timeout_s):
            while kind not in self.kinds():
                await asyncio.sleep(0.01)

    async def said(
        self, session_id: str, text: str, kind: str = "agent_message_chunk", timeout_s: float = 10
    ) -> None:
        """Return once the session's updates of `kind` say `text` (the SDK runs update
        handlers as tasks: a request's answer can be read before the updates sent ahead of
        it have been handled)."""
        async with asyncio.timeout(timeout_s):
            while self.text(session_id, kind) != text:
                await asyncio.sleep(0.01)

    def kinds(self, session_id: str | None = None) -> list[str]:
        return [u.session_update for s, u in self.updates if session_id in (None, s)]

    def text(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        return "".join(
            u.content.text for s, u in self.updates if s == session_id and u.session_update == kind
        )

    def of(self, kind: str, session_id: str | None = None) -> list[Any]:
        return [u for s, u in self.updates if u.session_update == kind and session_id in (None, s)]


class RavenAcp:
    """A running `raven acp` with an SDK connection to it."""

    def __init__(self, proc: asyncio.subprocess.Process, editor: Editor) -> None:
        self.proc = proc
        self.editor = editor
        self.lines: list[bytes] = []
        self.sent: dict[Any, str] = {}
        self.stderr = b""
        self._stdout = asyncio.StreamReader(limit=64 * 1024 * 1024)
        self._pump = asyncio.create_task(self._tap())
        self._drain = asyncio.create_task(self._read_stderr())
        self.conn = acp.connect_to_agent(
            editor,
            proc.stdin,
            self._stdout,
            use_unstable_protocol=True,
            observers=[self._observe],
        )

    @classmethod
    async def start(
        cls, env: dict[str, str], editor: Editor | None = None, args: tuple[str, ...] = ()
    ) -> RavenAcp:
        proc = await asyncio.create_subprocess_exec(
            *RAVEN,
            "acp",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            limit=64 * 1024 * 1024,
        )
        return cls(proc, editor or Editor())

    async def initialize(self, elicitation: bool = False) -> schema.InitializeResponse:
        caps = schema.ClientCapabilities(
            elicitation=schema.ElicitationCapabilities(form=schema.ElicitationFormCapabilities())
            if elicitation
            else None
        )
        return await self.conn.initialize(protocol_version=1, client_capabilities=caps)

    async def new_session(self, cwd: Path) -> str:
        return (await self.conn.new_session(cwd=str(cwd), mcp_servers=[])).session_id

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """A raw request through the SDK connection (for methods it does not wrap)."""
        return await self.conn._conn.send_request(method, params)

    async def close(self, timeout: float = 10) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        code = await asyncio.wait_for(self.proc.wait(), timeout)
        await asyncio.wait_for(self._pump, timeout)
        await asyncio.wait_for(self._drain, timeout)
        await self.conn.close()
        return code

    def kill(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()

    def _observe(self, event: StreamEvent) -> None:
        msg = event.message
        if event.direction == StreamDirection.OUTGOING and "method" in msg and "id" in msg:
            self.sent[msg["id"]] = msg["method"]

    async def _tap(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            self.lines.append(line)
            self._stdout.feed_data(line)
        self._stdout.feed_eof()

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        self.stderr = await self.proc.stderr.read()

    def check_frames(self, pinned: AcpSchema) -> None:
        """Every stdout line is one JSON-RPC message valid against the ACP schema."""
        for raw in self.lines:
            assert raw.endswith(b"\n")
        check_frames([json.loads(raw) for raw in self.lines], self.sent, pinned)


class Frames:
    """An SDK connection's observer keeping what Raven sent (over any transport), to be
    checked with `check`."""

    def __init__(self) -> None:
        self.received: list[dict[str, Any]] = []
        self.sent: dict[Any, str] = {}

    def __call__(self, event: StreamEvent) -> None:
        msg = event.message
        if event.direction == StreamDirection.INCOMING:
            self.received.append(msg)
        elif "method" in msg and "id" in msg:
            self.sent[msg["id"]] = msg["method"]

    def check(self, pinned: AcpSchema | None = None) -> None:
        check_frames(self.received, self.sent, pinned)


def check_frames(
    messages: list[dict[str, Any]], sent: dict[Any, str], pinned: AcpSchema | None = None
) -> None:
    """Each message Raven sent is JSON-RPC valid against the ACP schema (and, given
    `pinned`, as the TypeScript SDK reads it); `sent`: the method of each of the editor's
    requests, by id."""
    if pinned is not None:
        items = [item for msg in messages if (item := _pinned(msg, sent)) is not None]
        refused = [
            (item, read)
            for item, read in zip(items, pinned.read(items), strict=True)
            if "ok" not in read
        ]
        assert refused == []
    for msg in messages:
        assert msg["jsonrpc"] == "2.0", msg
        if "method" in msg:
            method = msg["method"]
            if method == "session/update":
                schema.SessionNotification.model_validate(msg["params"])
            elif method in REQUEST_MODELS:
                REQUEST_MODELS[method].validate_python(msg["params"])
            else:
                assert method == "$/cancel_request", method
        elif "error" in msg:
            assert isinstance(msg["error"]["code"], int)
            assert isinstance(msg["error"]["message"], str)
        else:
            model = RESPONSE_MODELS.get(sent.get(msg["id"]) or "")
            if model is not None:
                model.model_validate(msg["result"])


def said(words: str) -> list[schema.TextContentBlock]:
    """A prompt of plain text."""
    return [schema.TextContentBlock(type="text", text=words)]


WRITE_IT = {"name": "write_file", "arguments": {"path": "remote.txt", "content": "from afar"}}
"""The scripted call the remote editors' first turn makes (then it says "Written.")."""


async def remote_session(
    editor: Editor, transport: Any, cwd: Path
) -> tuple[acp.ClientSideConnection, Frames, str]:
    """An SDK connection over a remote transport, initialized, and a new session in `cwd`."""
    frames = Frames()
    conn = acp.connect_to_agent(editor, transport, use_unstable_protocol=True, observers=[frames])
    init = await conn.initialize(protocol_version=1)
    assert init.protocol_version == 1 and init.agent_info.name == "raven"
    return conn, frames, (await conn.new_session(cwd=str(cwd), mcp_servers=[])).session_id


async def writes_remotely(
    conn: acp.ClientSideConnection, editor: Editor, sid: str, cwd: Path
) -> None:
    """The first turn of `WRITE_IT`: its permission asked over the transport, allowed by
    the editor, the file written and the answer said."""
    answer = await conn.prompt(session_id=sid, prompt=said("write it"))
    assert answer.stop_reason == "end_turn"
    await editor.said(sid, "Written.")
    asked = editor.permissions[0]
    assert asked.tool_call.title and "remote.txt" in asked.tool_call.title
    assert (cwd / "remote.txt").read_text() == "from afar"


def _pinned(msg: dict[str, Any], sent: dict[Any, str]) -> tuple[str, Any, Version] | None:
    """How the pinned schema reads one message Raven sent (None: an error, or the answer
    to an extension method, which the schema leaves open)."""
    if "method" in msg:
        version: Version = "stable"
        update = msg.get("params", {}).get("update")
        if isinstance(update, dict) and update.get("sessionUpdate") in UNSTABLE_UPDATES:
            version = "unstable"
        return PINNED_MESSAGES[msg["method"]], msg["params"], version
    if "result" in msg and (read := PINNED_RESULTS.get(sent.get(msg["id"]) or "")):
        return read[0], msg["result"], read[1]
    return None
