"""Project instructions: which files a session in a directory reads, in what order, how
much of them, and what the model is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from raven.engine.project import MAX_BYTES, NONE, read_project_instructions


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A repository inside a folder that has an AGENTS.md of its own (not the project's)."""
    (tmp_path / "AGENTS.md").write_text("OUTSIDE the repository\n")
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "pkg" / "sub").mkdir(parents=True)
    return root


def test_files_are_read_from_the_repository_root_down_to_the_directory(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("Run the tests with `make check`.\n")
    (repo / "pkg" / "CLAUDE.md").write_text("pkg: no new dependencies.\n")
    (repo / "pkg" / "sub" / "GEMINI.md").write_text("sub: keep functions short.\n")
    found = read_project_instructions(repo / "pkg" / "sub")
    assert found.names(repo / "pkg" / "sub") == ["../../AGENTS.md", "../CLAUDE.md", "GEMINI.md"]
    text = found.text
    assert text.index("make check") < text.index("no new dependencies") < text.index("short")
    assert "## ../../AGENTS.md\n\nRun the tests" in text
    assert "OUTSIDE" not in text  # never above the repository's root


def test_agents_md_is_read_instead_of_a_vendor_file_beside_it(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("the shared rules\n")
    (repo / "CLAUDE.md").write_text("@AGENTS.md\n")
    found = read_project_instructions(repo)
    assert found.files == (repo / "AGENTS.md",)
    assert "@AGENTS.md" not in found.text


def test_outside_a_repository_only_the_directory_itself_is_read(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("parent's\n")
    here = tmp_path / "scratch"
    here.mkdir()
    assert read_project_instructions(here) == NONE
    (here / "AGENTS.md").write_text("scratch's\n")
    assert read_project_instructions(here).files == (here / "AGENTS.md",)


def test_a_worktree_root_is_found_by_its_git_file(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("not this one\n")
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / ".git").write_text("gitdir: /elsewhere/.git/worktrees/tree\n")
    (tree / "AGENTS.md").write_text("the worktree's\n")
    assert read_project_instructions(tree / "src").files == (tree / "AGENTS.md",)


def test_the_model_gets_at_most_the_limit_and_is_told_of_the_cut(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("a" * (MAX_BYTES - 10))
    (repo / "pkg" / "AGENTS.md").write_text("b" * 100)
    (repo / "pkg" / "sub" / "AGENTS.md").write_text("c" * 100)
    found = read_project_instructions(repo / "pkg" / "sub")
    assert found.text.count("a") >= MAX_BYTES - 10 and found.text.count("b") == 10
    assert "c" * 10 not in found.text  # nothing left for it
    assert "past the 32 KiB limit" in found.text


def test_credentials_in_them_are_masked(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("deploy with OPENAI key sk-proj-abcdefghijklmnopqrstuv\n")
    text = read_project_instructions(repo).text
    assert "abcdefghijklmnop" not in text and "[REDACTED]" in text
