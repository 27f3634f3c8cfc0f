"""A2A parts as Raven keeps them, for the A2A server and `a2a_send` alike: data as fenced
JSON, files saved under safe names. Writes only inside the folder it is given.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

from a2a.types import Part
from google.protobuf.json_format import MessageToDict

MAX_DATA_BYTES = 64 * 1024
DATA_TYPE = "application/json"
_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]+")
MAX_NAME_CHARS = 120
"""Longer names (a peer's file name, a context id) are shortened: file systems stop at 255
bytes, and a name is never a reason to fail a task."""
_MAX_SUFFIX_CHARS = 16


def fenced_data(part: Part, sent: Any = None) -> str:
    """A data part as a fenced JSON block, named by its media type or metadata name; `sent`
    is its JSON as it arrived, when known (the part's Struct has lost integers and order)."""
    name = ""
    if part.HasField("metadata") and "name" in part.metadata.fields:
        name = part.metadata.fields["name"].string_value
    label = " ".join(x for x in (part.media_type or DATA_TYPE, name) if x)
    value = sent if sent is not None else MessageToDict(part.data)
    body = json.dumps(value, indent=2, ensure_ascii=False)
    return f"[data: {label}]\n```json\n{body}\n```"


def safe_name(name: str, taken: set[str]) -> str:
    """A file name with no directories, no leading dot, at most `MAX_NAME_CHARS` and no clash
    with `taken`. A long name keeps its start and extension and gains a hash of the whole."""
    base = _UNSAFE.sub("_", Path(name.replace("\\", "/")).name).strip(" .") or "file"
    if len(base) > MAX_NAME_CHARS:
        head, dot, ext = base.rpartition(".")
        if not head or len(ext) > _MAX_SUFFIX_CHARS:
            head, dot, ext = base, "", ""
        digest = hashlib.sha256(name.encode()).hexdigest()[:12]
        keep = MAX_NAME_CHARS - len(digest) - len(dot + ext) - 1 - 8  # room for a "-N" suffix
        base = f"{head[:keep]}-{digest}{dot}{ext}"
    stem, dot, suffix = base.partition(".")
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{stem}-{n}{dot}{suffix}"
    taken.add(candidate)
    return candidate


def save_file(folder: Path, name: str, data: bytes, taken: set[str]) -> Path:
    """Write `data` under `folder` with a safe, unused name; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    taken |= {p.name for p in folder.iterdir()}
    path = folder / safe_name(name, taken)
    path.write_bytes(data)
    return path
