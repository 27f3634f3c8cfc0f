from __future__ import annotations

from pathlib import Path

import pytest

from raven.tools import ToolContext, ToolError
from raven.tools.files import (
    EditFile,
    EditFileArgs,
    ListDir,
    ListDirArgs,
    ReadFile,
    ReadFileArgs,
    WriteFile,
    WriteFileArgs,
)


async def test_read_file_whole_and_line_ranges(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("one\ntwo\nthree\nfour\n")
    assert (await ReadFile().run(ReadFileArgs(path="f.txt"), ctx)).text == "one\ntwo\nthree\nfour\n"
    ranged = await ReadFile().run(ReadFileArgs(path="f.txt", start_line=2, end_line=3), ctx)
    assert ranged.text == "two\nthree\n"
    with pytest.raises(ToolError, match="past the end"):
        await ReadFile().run(ReadFileArgs(path="f.txt", start_line=9), ctx)


async def test_read_file_refuses_binary_clearly(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "img.bin").write_bytes(b"\x89PNG\x00\x01\x02")
    with pytest.raises(ToolError, match="binary file"):
        await ReadFile().run(ReadFileArgs(path="img.bin"), ctx)
    with pytest.raises(ToolError, match="no such file"):
        await ReadFile().run(ReadFileArgs(path="ghost.txt"), ctx)


async def test_absolute_paths_are_kept(ctx: ToolContext, tmp_path: Path) -> None:
    other = tmp_path / "elsewhere.txt"
    other.write_text("abs")
    assert (await ReadFile().run(ReadFileArgs(path=str(other)), ctx)).text == "abs"


async def test_write_file_creates_parents_and_reports_a_diff(
    ctx: ToolContext, tmp_path: Path
) -> None:
    out = await WriteFile().run(WriteFileArgs(path="a/b/c.txt", content="new"), ctx)
    assert (tmp_path / "a/b/c.txt").read_text() == "new"
    assert out.diff is not None and out.diff.old_text is None
    again = await WriteFile().run(WriteFileArgs(path="a/b/c.txt", content="newer"), ctx)
    assert again.diff is not None and again.diff.old_text == "new"


async def test_edit_file_replaces_exactly_one_match(ctx: ToolContext, tmp_path: Path) -> None:
    f = tmp_path / "code.py"
    f.write_text("x = 1\ny = 1\nx = 1\n")
    with pytest.raises(ToolError, match="occurs 2 times"):
        await EditFile().run(EditFileArgs(path="code.py", old_text="x = 1", new_text="x = 2"), ctx)
    with pytest.raises(ToolError, match="not found"):
        await EditFile().run(EditFileArgs(path="code.py", old_text="z = 1", new_text=""), ctx)
    assert f.read_text() == "x = 1\ny = 1\nx = 1\n"
    out = await EditFile().run(
        EditFileArgs(path="code.py", old_text="y = 1", new_text="y = 2"), ctx
    )
    assert f.read_text() == "x = 1\ny = 2\nx = 1\n"
    assert out.diff is not None and out.diff.old_text == "x = 1\ny = 1\nx = 1\n"


async def test_list_dir_marks_directories(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "file.txt").write_text("")
    assert (await ListDir().run(ListDirArgs(), ctx)).text == "file.txt\nsub/"
    with pytest.raises(ToolError, match="no such directory"):
        await ListDir().run(ListDirArgs(path="nope"), ctx)


async def test_huge_files_are_refused_before_reading(
    ctx: ToolContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("raven.tools.files.MAX_READ_BYTES", 1000)
    (tmp_path / "big.log").write_text("x" * 2000)
    with pytest.raises(ToolError, match="too large to read"):
        await ReadFile().run(ReadFileArgs(path="big.log"), ctx)
