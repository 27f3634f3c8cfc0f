from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from raven.tools import ToolContext, ToolError
from raven.tools.search import Search, SearchArgs


def tree(root: Path) -> None:
    (root / "src").mkdir()
    (root / "src/app.py").write_text("def main():\n    return 'needle'\n")
    (root / "build").mkdir()
    (root / "build/out.py").write_text("needle in build\n")
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "debug.log").write_text("needle in log\n")
    (root / ".git").mkdir(exist_ok=True)
    (root / ".git/needle").write_text("needle in git\n")


async def test_search_skips_git_and_ignored_files_without_git(
    ctx: ToolContext, tmp_path: Path
) -> None:
    tree(tmp_path)
    out = await Search().run(SearchArgs(pattern="needle"), ctx)
    assert out.text == "src/app.py:2:     return 'needle'"


async def test_search_uses_git_ignore_rules_in_a_work_tree(
    ctx: ToolContext, tmp_path: Path
) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    tree(tmp_path)
    (tmp_path / "src/notes.md").write_text("a needle too\n")
    out = await Search().run(SearchArgs(pattern=r"needle", glob="*.py"), ctx)
    assert out.text == "src/app.py:2:     return 'needle'"


async def test_search_reports_bad_regex_and_no_matches(ctx: ToolContext, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    with pytest.raises(ToolError, match="invalid regular expression"):
        await Search().run(SearchArgs(pattern="("), ctx)
    assert (await Search().run(SearchArgs(pattern="absent"), ctx)).text == "no matches"
