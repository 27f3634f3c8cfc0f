"""One `SendMessage` to a remote A2A peer: discover its card, pick the interface, send, read.

Every step has a deadline; a redirect is an error naming where it pointed; a
JSON-RPC interface on another origin than the card is refused before anything
is sent; responses are read up to a size cap. Everything the peer sends is
scrubbed of our credential where it enters, before anything else reads it.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import mimetypes
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
from a2a.client.card_resolver import parse_agent_card
from a2a.helpers import get_message_text
from a2a.types import (
    AgentCard,
    AgentInterface,
    Message,
    Part,
    Role,
    SendMessageResponse,
    Task,
    TaskState,
)
from google.protobuf.json_format import ParseDict

from raven.a2a_client.credentials import OriginScopedBearer, credential_for
from raven.a2a_parts import MAX_DATA_BYTES, fenced_data, safe_name, save_file
from raven.config import A2AClientConfig, A2APeer
from raven.errors import RavenError
from raven.origins import BadOrigin, Origin, is_loopback, origin_of, show
from raven.tools import clip

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
_CHUNK = 65536


class PeerError(RavenError):
    """The peer could not be asked, refused, failed the task, or answered badly."""


@dataclass
class PeerReply:
    state: str
    """`completed`, `input-required`, `auth-required`, `working`, or `message`."""
    text: str
    task_id: str = ""
    context_id: str = ""
    raw: dict[str, Any] = field(default_factory=dict)
    received: list[str] = field(default_factory=list)
    """What else the peer sent, a line each: files saved (and where), files by URI."""


async def send_message(
    card_url: str,
    text: str,
    peers: Sequence[A2APeer],
    settings: A2AClientConfig,
    task_id: str | None = None,
    context_id: str | None = None,
    files: Sequence[Path] = (),
    inbox: Path | None = None,
) -> PeerReply:
    """Ask the peer behind `card_url`, sending `files` too; raises `PeerError` with a clear
    reason. Files in the reply are saved under `inbox/<peer host>/` (listed when no inbox)."""
    try:
        card_origin = origin_of(card_url)
    except BadOrigin as exc:
        raise PeerError(f"card URL {exc}") from None
    parts = await asyncio.to_thread(file_parts, files, settings.max_file_bytes)
    peer = credential_for(peers, card_origin)
    auth = OriginScopedBearer(card_origin, peer.credential) if peer else None
    secrets = [peer.credential] if peer else []
    timeout = httpx.Timeout(settings.timeout_s, connect=CONNECT_TIMEOUT_S)
    try:
        async with (
            asyncio.timeout(settings.timeout_s),
            httpx.AsyncClient(timeout=timeout, follow_redirects=False, auth=auth) as http,
        ):
            card = parse_agent_card(await _get_json(http, card_url, settings, secrets))
            rpc_url = _choose_interface(card, card_url).url
            body = {
                "jsonrpc": "2.0",
                "id": uuid.uuid4().hex,
                "method": "SendMessage",
                "params": {"message": message_json(text, task_id, context_id, parts)},
            }
            reply = await _post_json(http, rpc_url, body, settings, secrets)
    except TimeoutError:
        raise PeerError(
            f"the peer at {show(card_origin)} did not answer within {settings.timeout_s:g}s"
        ) from None
    except httpx.TimeoutException:
        raise PeerError(f"the peer at {show(card_origin)} timed out") from None
    except httpx.HTTPError as exc:
        raise PeerError(
            f"cannot reach the peer at {show(card_origin)}: {type(exc).__name__}"
        ) from None
    peer_inbox = inbox / safe_name(card_origin[1], set()) if inbox is not None else None
    return await asyncio.to_thread(read_reply, reply, peer_inbox, settings.max_file_bytes)


def file_parts(files: Sequence[Path], max_bytes: int) -> list[dict[str, Any]]:
    parts = []
    for path in files:
        if not path.is_file():
            raise PeerError(f"{path}: no such file; nothing was sent")
        size = path.stat().st_size
        if size > max_bytes:
            raise PeerError(
                f"{path} is {size} bytes, over a2a.client.maxFileBytes ({max_bytes}); "
                "nothing was sent"
            )
        parts.append(
            {
                "raw": base64.b64encode(path.read_bytes()).decode(),
                "filename": path.name,
                "mediaType": mimetypes.guess_type(path.name)[0] or "application/octet-stream",
            }
        )
    return parts


def _choose_interface(card: AgentCard, card_url: str) -> AgentInterface:
    candidates = [
        i
        for i in card.supported_interfaces
        if i.protocol_binding.upper() == "JSONRPC" and i.protocol_version.split(".")[0] == "1"
    ]
    if not candidates:
        raise PeerError("the peer's card offers no JSON-RPC interface for A2A 1.x")
    chosen = candidates[0]
    try:
        card_origin, rpc_origin = origin_of(card_url), origin_of(chosen.url)
    except BadOrigin:
        card_origin, rpc_origin = origin_of(card_url), None
    if rpc_origin == card_origin:
        return chosen
    if rpc_origin is not None and _same_loopback(card_origin, rpc_origin):
        # `localhost` and 127.0.0.1 with one port are one listener: reach it as the card was.
        where = urlsplit(card_url)
        return AgentInterface(
            url=urlsplit(chosen.url)._replace(scheme=where.scheme, netloc=where.netloc).geturl(),
            protocol_binding=chosen.protocol_binding,
            protocol_version=chosen.protocol_version,
        )
    raise PeerError(
        f"refused: the peer's JSON-RPC interface ({chosen.url}) is on another "
        f"origin than its card ({card_url}); nothing was sent"
    )


def _same_loopback(a: Origin, b: Origin) -> bool:
    return a[0] == b[0] and a[2] == b[2] and is_loopback(a[1]) and is_loopback(b[1])


def message_json(
    text: str, task_id: str | None, context_id: str | None, files: list[dict[str, Any]]
) -> dict[str, Any]:
    message: dict[str, Any] = {
        "messageId": uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"text": text}, *files],
    }
    if task_id:
        message["taskId"] = task_id
    if context_id:
        message["contextId"] = context_id
    return message


async def _get_json(
    http: httpx.AsyncClient, url: str, settings: A2AClientConfig, secrets: list[str]
) -> dict[str, Any]:
    async with http.stream("GET", url, headers={"Accept": "application/json"}) as response:
        return await _read_json(response, settings, secrets, what="card")


async def _post_json(
    http: httpx.AsyncClient,
    url: str,
    body: dict[str, Any],
    settings: A2AClientConfig,
    secrets: list[str],
) -> dict[str, Any]:
    headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
    async with http.stream("POST", url, json=body, headers=headers) as response:
        return await _read_json(response, settings, secrets, what="reply")


async def _read_json(
    response: httpx.Response, settings: A2AClientConfig, secrets: list[str], what: str
) -> dict[str, Any]:
    if response.is_redirect:
        where = response.headers.get("Location", "(no Location)")
        raise PeerError(
            f"refused: the peer's {what} URL redirects to {scrub(where, secrets)}; "
            "redirects are not followed"
        )
    data = bytearray()
    async for chunk in response.aiter_bytes(_CHUNK):
        data += chunk
        if len(data) > settings.max_response_bytes:
            raise PeerError(
                f"the peer's {what} is larger than {settings.max_response_bytes} bytes; not read"
            )
    if response.status_code == 401:
        raise PeerError(
            f"the peer refused the request (HTTP 401): no valid credential for "
            f"{show(origin_of(str(response.url)))} in a2a.peers"
        )
    try:
        value = scrub(json.loads(data), secrets)
    except ValueError:
        raise PeerError(f"the peer's {what} is not JSON (HTTP {response.status_code})") from None
    except RecursionError:
        raise PeerError(f"the peer's {what} is nested too deeply to read") from None
    if response.status_code >= 400 and not (isinstance(value, dict) and "error" in value):
        raise PeerError(f"the peer answered HTTP {response.status_code}")
    if not isinstance(value, dict):
        raise PeerError(f"the peer's {what} is not a JSON object")
    return value


def read_reply(reply: dict[str, Any], inbox: Path | None, max_bytes: int) -> PeerReply:
    if "error" in reply:
        error = reply["error"] if isinstance(reply["error"], dict) else {}
        raise PeerError(
            f"the peer answered with JSON-RPC error {error.get('code')}: {error.get('message', '')}"
        )
    try:
        result = ParseDict(
            reply.get("result") or {}, SendMessageResponse(), ignore_unknown_fields=True
        )
    except Exception:
        raise PeerError("the peer's reply is not a SendMessage result") from None
    if result.HasField("message"):
        message = result.message
        sent = _sent_parts(reply, "result", "message")
        texts, received = _parts([(message.parts, sent)], inbox, max_bytes)
        return PeerReply(
            "message", "\n\n".join(texts), message.task_id, message.context_id, reply, received
        )
    if not result.HasField("task"):
        raise PeerError("the peer's reply holds neither a task nor a message")
    return _task_reply(result.task, reply, inbox, max_bytes)


_Group = tuple[Sequence[Part], list[Any]]
"""A message's or artifact's parts, and the same parts as the peer's JSON had them."""


def _sent_parts(value: Any, *path: str | int) -> list[Any]:
    """The `parts` list at `path` in the peer's JSON reply (empty where there is none): a
    data part's JSON as sent keeps integers and key order, which its Struct loses."""
    for step in path:
        if isinstance(step, int):
            value = value[step] if isinstance(value, list) and step < len(value) else None
        else:
            value = value.get(step) if isinstance(value, dict) else None
    parts = value.get("parts") if isinstance(value, dict) else None
    return parts if isinstance(parts, list) else []


def _parts(
    groups: Sequence[_Group], inbox: Path | None, max_bytes: int
) -> tuple[list[str], list[str]]:
    """(texts, lines about files) of groups of parts: each group's text joined, data as
    fenced JSON (as the peer sent it), inline files saved to `inbox`, files by URI listed;
    nothing dropped."""
    texts: list[str] = []
    received: list[str] = []
    taken: set[str] = set()
    seen: set[tuple[str, str]] = set()
    for parts, sent in groups:
        texts.append("".join(p.text for p in parts if p.WhichOneof("content") == "text"))
        for index, part in enumerate(parts):
            kind = part.WhichOneof("content")
            if kind == "data":
                raw = sent[index] if index < len(sent) else None
                data = raw.get("data") if isinstance(raw, dict) else None
                texts.append(clip(fenced_data(part, data), MAX_DATA_BYTES))
            elif kind == "url":
                received.append(f"file by reference (not fetched): {part.url}")
            elif kind == "raw":
                identity = (part.filename, hashlib.sha256(part.raw).hexdigest())
                if identity not in seen:  # the same file in an artifact and a message
                    seen.add(identity)
                    received.append(_saved(part, inbox, max_bytes, taken))
    return texts, received


def _saved(part: Part, inbox: Path | None, max_bytes: int, taken: set[str]) -> str:
    name, size = part.filename or "file", len(part.raw)
    kind = part.media_type or "application/octet-stream"
    if inbox is None:
        return f"file {name} ({kind}, {size} bytes): not saved"
    if size > max_bytes:
        return f"file {name} ({kind}, {size} bytes): not saved, over a2a.client.maxFileBytes"
    path = save_file(inbox, name, part.raw, taken)
    return f"file saved: {path} ({kind}, {size} bytes)"


def _task_reply(task: Task, raw: dict[str, Any], inbox: Path | None, max_bytes: int) -> PeerReply:
    state = TaskState.Name(task.status.state).removeprefix("TASK_STATE_").lower().replace("_", "-")
    status_text = get_message_text(task.status.message) if task.status.HasField("message") else ""
    if task.status.state in (
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_REJECTED,
        TaskState.TASK_STATE_CANCELED,
    ):
        detail = f": {status_text}" if status_text else ""
        raise PeerError(f"the peer's task {task.id} ended {state}{detail}")
    where = ("result", "task")
    groups: list[_Group] = [
        (m.parts, _sent_parts(raw, *where, "history", i))
        for i, m in enumerate(task.history)
        if m.role == Role.ROLE_AGENT and not _is_progress(m)
    ]
    # An artifact streamed in chunks (`append`) holds its text as consecutive parts.
    groups += [
        (a.parts, _sent_parts(raw, *where, "artifacts", i)) for i, a in enumerate(task.artifacts)
    ]
    if task.status.HasField("message"):
        groups.append((task.status.message.parts, _sent_parts(raw, *where, "status", "message")))
    texts, received = _parts(groups, inbox, max_bytes)
    unique = list(dict.fromkeys(t.strip() for t in texts if t and t.strip()))
    return PeerReply(state, "\n\n".join(unique), task.id, task.context_id, raw, received)


def _is_progress(message: Message) -> bool:
    """A Raven peer's progress line (its working-status messages), not part of the answer."""
    raven = message.metadata.fields.get("raven") if message.HasField("metadata") else None
    progress = raven.struct_value.fields.get("progress") if raven is not None else None
    return progress is not None and progress.bool_value


def scrub(value: Any, secrets: list[str]) -> Any:
    """A copy of a JSON value with every secret, in any letter case, replaced by `***`."""
    patterns = [re.compile(re.escape(s), re.IGNORECASE) for s in secrets if s]
    if not patterns:
        return value

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            for pattern in patterns:
                v = pattern.sub("***", v)
            return v
        if isinstance(v, dict):
            return {walk(k): walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(value)
