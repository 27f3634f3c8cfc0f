"""Files attached to a prompt (`--file PATH`, `@path` in the chat) as parts of it.

A text file goes inline under its name in a fenced block; an image (PNG, JPEG, GIF,
WebP) as an image part, for models that take them. Reads only the files named; anything
else (a missing file, a binary that is no image, one too large) is an `AttachmentError`
before the model is called.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Sequence
from pathlib import Path

from raven.errors import RavenError
from raven.messages import ImagePart, Part, TextPart

MAX_TEXT_BYTES = 1024 * 1024
MAX_IMAGE_BYTES = 5 * 1024 * 1024
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}


class AttachmentError(RavenError):
    """A file that cannot go with the prompt, and why (a usage error: exit 2)."""

    exit_code = 2


def file_parts(paths: Sequence[Path]) -> list[Part]:
    """The prompt parts for `paths`, in the order given; raises `AttachmentError`."""
    return [file_part(path) for path in paths]


def file_part(path: Path) -> Part:
    """The prompt part for one file; raises `AttachmentError`."""
    if not path.is_file():
        raise AttachmentError(f"{path}: no such file")
    size = path.stat().st_size
    mime = IMAGE_TYPES.get(path.suffix.lower())
    limit = MAX_IMAGE_BYTES if mime else MAX_TEXT_BYTES
    if size > limit:
        raise AttachmentError(f"{path}: larger than {limit} bytes")
    data = path.read_bytes()
    if mime:
        return ImagePart(data=base64.b64encode(data).decode(), mime_type=mime)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise AttachmentError(
            f"{path}: neither UTF-8 text nor an image ({', '.join(sorted(IMAGE_TYPES))})"
        ) from None
    return TextPart(text=fenced(f"{path.name}:", text))


def fenced(label: str, text: str) -> str:
    """`text` under `label` in a code fence longer than any run of backticks it holds."""
    fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
    return f"{label}\n{fence}\n{text.rstrip()}\n{fence}"
