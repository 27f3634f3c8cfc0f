"""A peer's message parts as Raven's prompt: text as is, data as fenced JSON, inline files
saved to the task's inbox, files by URI as references. Nothing a peer sends is dropped
without a word.

Checks come first (`check_parts`), as A2A errors, before anything is written. Never
fetches a URI on a peer's behalf; never writes outside the inbox it is given.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from a2a.types import Message
from a2a.utils.errors import ContentTypeNotSupportedError, InvalidParamsError
from google.protobuf.json_format import MessageToDict

from raven.a2a_parts import DATA_TYPE, MAX_DATA_BYTES, fenced_data, save_file
from raven.config import A2AServerConfig

TEXT_TYPES = ("text/plain", "text/*")
FILE_FALLBACK_TYPE = "application/octet-stream"
MAX_FILES_PER_MESSAGE = 32
"""Inline files one message may leave in the task's inbox (each within `maxFileBytes`):
a peer cannot fill a folder with thousands."""


def input_modes(settings: A2AServerConfig) -> list[str]:
    """What the card says Raven takes: text, JSON data, and the configured file types."""
    return list(dict.fromkeys(["text/plain", DATA_TYPE, *settings.file_media_types]))


def check_parts(message: Message, settings: A2AServerConfig) -> None:
    """Raise the A2A error for a part Raven will not take: too large, or of a type it does
    not accept (-32005, listing what it does), or more files than one message may leave."""
    files = sum(1 for part in message.parts if part.WhichOneof("content") == "raw")
    if files > MAX_FILES_PER_MESSAGE:
        raise InvalidParamsError(
            message=f"the message carries {files} files; a message may carry at most "
            f"{MAX_FILES_PER_MESSAGE} (send the rest in another, or as one archive)"
        )
    for index, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        media_type = part.media_type
        if kind == "text":
            allowed = not media_type or _matches(media_type, TEXT_TYPES)
        elif kind == "data":
            size = len(json.dumps(MessageToDict(part.data)).encode())
            if size > MAX_DATA_BYTES:
                raise InvalidParamsError(
                    message=f"parts[{index}]: data of {size} bytes is over the cap of "
                    f"{MAX_DATA_BYTES} bytes per part"
                )
            allowed = not media_type or media_type == DATA_TYPE or media_type.endswith("+json")
        elif kind in ("raw", "url"):
            if kind == "raw" and len(part.raw) > settings.max_file_bytes:
                raise InvalidParamsError(
                    message=f"parts[{index}]: a file of {len(part.raw)} bytes is over "
                    f"a2a.server.maxFileBytes ({settings.max_file_bytes} bytes)"
                )
            allowed = _matches(media_type or FILE_FALLBACK_TYPE, settings.file_media_types)
        else:
            raise InvalidParamsError(
                message=f"parts[{index}] has no content: a part needs text, data, raw or url"
            )
        if not allowed:
            accepted = ", ".join(input_modes(settings))
            raise ContentTypeNotSupportedError(
                message=f"parts[{index}]: {media_type or kind} is not accepted; "
                f"Raven accepts: {accepted}"
            )


def sent_data(params: dict[str, Any]) -> list[Any] | None:
    """Each part's `data` as the peer sent it in a send's params (JSON keeps integers and
    key order; the protobuf Struct it is parsed into keeps neither), by part index."""
    message = params.get("message")
    parts = message.get("parts") if isinstance(message, dict) else None
    if not isinstance(parts, list):
        return None
    return [p.get("data") if isinstance(p, dict) else None for p in parts]


def prompt_text(message: Message, inbox: Path | None, data: list[Any] | None = None) -> str:
    """The message as one prompt; inline files are written into `inbox` first (None only
    for a message without any). `data` is `sent_data` of the request, used for data parts
    instead of their parsed form."""
    pieces: list[str] = []
    taken: set[str] = set()
    for index, part in enumerate(message.parts):
        kind = part.WhichOneof("content")
        if kind == "text":
            pieces.append(part.text)
        elif kind == "data":
            sent = data[index] if data is not None and index < len(data) else None
            pieces.append(fenced_data(part, sent))
        elif kind == "raw":
            assert inbox is not None, "a message with files needs an inbox"
            path = save_file(inbox, part.filename or "file", part.raw, taken)
            pieces.append(
                f"[file from the peer: {path} ({part.media_type or FILE_FALLBACK_TYPE}, "
                f"{len(part.raw)} bytes); read it with your file tools]"
            )
        elif kind == "url":
            pieces.append(
                f"[file by reference, not fetched: {part.url} "
                f"({part.media_type or 'type not given'})]"
            )
    return "\n\n".join(p for p in pieces if p)


def _matches(media_type: str, patterns: Sequence[str]) -> bool:
    value = media_type.split(";")[0].strip().lower()
    return any(fnmatch.fnmatchcase(value, p.lower()) for p in patterns)
