"""File tools: read_file, write_file, edit_file, list_dir. Paths resolve against the session cwd."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from raven.tools.base import (
    Args,
    BuiltinTool,
    FileDiff,
    Preview,
    ToolContext,
    ToolError,
    ToolOutput,
)

MAX_LIST_ENTRIES = 1000
MAX_READ_BYTES = 20 * 1024 * 1024
_BINARY_SNIFF_BYTES = 8192


def read_text(path: Path) -> str:
    """The file's text; ToolError for a missing, unreadable, huge or binary file."""
    try:
        size = path.stat().st_size
        if size > MAX_READ_BYTES:
            raise ToolError(
                f"{path}: {size} bytes is too large to read (limit "
                f"{MAX_READ_BYTES}); use search, or run_command with head, tail or sed -n"
            )
        data = path.read_bytes()
    except FileNotFoundError as exc:
        raise ToolError(f"{path}: no such file") from exc
    except IsADirectoryError as exc:
        raise ToolError(f"{path}: is a directory; use list_dir") from exc
    except OSError as exc:
        raise ToolError(f"{path}: cannot read: {exc.strerror}") from exc
    if b"\x00" in data[:_BINARY_SNIFF_BYTES]:
        raise ToolError(f"{path}: is a binary file ({len(data)} bytes); not shown")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(f"{path}: is not UTF-8 text; not shown") from exc


def write_text(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ToolError(f"{path}: cannot write: {exc.strerror}") from exc


class ReadFileArgs(Args):
    path: str = Field(description="File path, absolute or relative to the working directory")
    start_line: int | None = Field(default=None, ge=1, description="First line to read (1-based)")
    end_line: int | None = Field(default=None, ge=1, description="Last line to read, inclusive")


class ReadFile(BuiltinTool):
    name: ClassVar[str] = "read_file"
    description: ClassVar[str] = "Read a text file, optionally a range of lines."
    kind = "read"
    needs_approval = False
    args_model = ReadFileArgs

    def title(self, args: ReadFileArgs, ctx: ToolContext) -> str:
        span = (
            f" (lines {args.start_line or 1}-{args.end_line or 'end'})"
            if (args.start_line or args.end_line)
            else ""
        )
        return f"Read {args.path}{span}"

    def locations(self, args: ReadFileArgs, ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.path)]

    async def run(self, args: ReadFileArgs, ctx: ToolContext) -> ToolOutput:
        text = await asyncio.to_thread(read_text, ctx.reach(args.path))
        if args.start_line is None and args.end_line is None:
            return ToolOutput(text)
        lines = text.splitlines(keepends=True)
        start = (args.start_line or 1) - 1
        end = args.end_line or len(lines)
        if start >= len(lines):
            raise ToolError(f"{args.path} has {len(lines)} lines; start_line is past the end")
        return ToolOutput("".join(lines[start:end]))


class WriteFileArgs(Args):
    path: str = Field(description="File path, absolute or relative to the working directory")
    content: str = Field(description="The whole new content of the file")


class WriteFile(BuiltinTool):
    name: ClassVar[str] = "write_file"
    description: ClassVar[str] = "Create or overwrite a text file with the given content."
    kind = "edit"
    args_model = WriteFileArgs

    def title(self, args: WriteFileArgs, ctx: ToolContext) -> str:
        return f"Write {args.path}"

    def locations(self, args: WriteFileArgs, ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.path)]

    async def preview(self, args: WriteFileArgs, ctx: ToolContext) -> Preview | None:
        path = ctx.reach(args.path, write=True)
        old = await asyncio.to_thread(_read_if_exists, path)
        return FileDiff(path=path, old_text=old, new_text=args.content)

    async def run(self, args: WriteFileArgs, ctx: ToolContext) -> ToolOutput:
        path = ctx.reach(args.path, write=True)
        old = await asyncio.to_thread(_read_if_exists, path)
        await asyncio.to_thread(write_text, path, args.content)
        verb = "Created" if old is None else "Wrote"
        return ToolOutput(
            f"{verb} {path} ({len(args.content)} characters)",
            diff=FileDiff(path=path, old_text=old, new_text=args.content),
        )


class EditFileArgs(Args):
    path: str = Field(description="File path, absolute or relative to the working directory")
    old_text: str = Field(min_length=1, description="Exact text to replace; must occur once")
    new_text: str = Field(description="Replacement text")


class EditFile(BuiltinTool):
    name: ClassVar[str] = "edit_file"
    description: ClassVar[str] = (
        "Replace one exact occurrence of old_text with new_text in a file. "
        "Fails if old_text occurs zero or several times; include more context to disambiguate."
    )
    kind = "edit"
    args_model = EditFileArgs

    def title(self, args: EditFileArgs, ctx: ToolContext) -> str:
        return f"Edit {args.path}"

    def locations(self, args: EditFileArgs, ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.path)]

    async def preview(self, args: EditFileArgs, ctx: ToolContext) -> Preview | None:
        path = ctx.reach(args.path, write=True)
        old = await asyncio.to_thread(read_text, path)
        if old.count(args.old_text) != 1:
            return None  # the edit will fail and say why; nothing to show
        return FileDiff(path=path, old_text=old, new_text=old.replace(args.old_text, args.new_text))

    async def run(self, args: EditFileArgs, ctx: ToolContext) -> ToolOutput:
        path = ctx.reach(args.path, write=True)
        old = await asyncio.to_thread(read_text, path)
        count = old.count(args.old_text)
        if count == 0:
            raise ToolError(f"{args.path}: old_text was not found; nothing changed")
        if count > 1:
            raise ToolError(
                f"{args.path}: old_text occurs {count} times; include more surrounding text "
                "so it matches exactly once. Nothing changed"
            )
        new = old.replace(args.old_text, args.new_text, 1)
        await asyncio.to_thread(write_text, path, new)
        return ToolOutput(f"Edited {path}", diff=FileDiff(path=path, old_text=old, new_text=new))


class ListDirArgs(Args):
    path: str = Field(default=".", description="Directory, absolute or relative")


class ListDir(BuiltinTool):
    name: ClassVar[str] = "list_dir"
    description: ClassVar[str] = "List a directory's entries; directories end with '/'."
    kind = "read"
    needs_approval = False
    args_model = ListDirArgs

    def title(self, args: ListDirArgs, ctx: ToolContext) -> str:
        return f"List {args.path}"

    def locations(self, args: ListDirArgs, ctx: ToolContext) -> list[Path]:
        return [ctx.resolve(args.path)]

    async def run(self, args: ListDirArgs, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(await asyncio.to_thread(_list, ctx.reach(args.path)))


def _list(path: Path) -> str:
    try:
        entries = sorted(path.iterdir(), key=lambda p: p.name)
    except FileNotFoundError as exc:
        raise ToolError(f"{path}: no such directory") from exc
    except NotADirectoryError as exc:
        raise ToolError(f"{path}: is a file; use read_file") from exc
    except OSError as exc:
        raise ToolError(f"{path}: cannot list: {exc.strerror}") from exc
    names = [e.name + ("/" if e.is_dir() else "") for e in entries[:MAX_LIST_ENTRIES]]
    if len(entries) > MAX_LIST_ENTRIES:
        names.append(f"… and {len(entries) - MAX_LIST_ENTRIES} more")
    return "\n".join(names) if names else "(empty directory)"


def _read_if_exists(path: Path) -> str | None:
    if not path.exists():
        return None
    try:
        return read_text(path)
    except ToolError:
        return None
