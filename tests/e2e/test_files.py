"""The files a user arranges: edits of one config at once all kept, a config or a store
that is a symlink (a dotfiles repository, another disk) written through and never
re-moded."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests.conftest import RAVEN, raven


def test_ten_models_added_at_once_are_all_kept(env: dict[str, str], home: Path) -> None:
    adding = [
        subprocess.Popen(
            [*RAVEN, "models", "add", f"m{n}", "--model", f"model-{n}"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(10)
    ]
    for proc in adding:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
    config = json.loads((home / "config.json").read_text())
    assert sorted(m["id"] for m in config["models"]) == sorted(f"m{n}" for n in range(10))
    assert (home / "config.json").stat().st_mode & 0o777 == 0o600


def test_a_symlinked_config_is_written_through_and_stays_a_link(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    target = dotfiles / "raven.json"
    target.write_text(json.dumps({"defaultModel": "echo"}))
    target.chmod(0o600)
    (home / "config.json").symlink_to(target)
    added = raven("models", "add", "local", "--model", "qwen", env=env)
    assert added.returncode == 0, added.stderr
    assert (home / "config.json").is_symlink()
    assert [m["id"] for m in json.loads(target.read_text())["models"]] == ["local"]


def test_a_symlinked_store_is_used_and_its_mode_left_alone(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "disk" / "raven.db"
    elsewhere.parent.mkdir()
    elsewhere.touch()
    elsewhere.chmod(0o640)  # the person's choice, on a file Raven did not make
    (home / "data").mkdir(mode=0o700)
    (home / "data" / "raven.db").symlink_to(elsewhere)
    ran = raven("run", "--model", "echo", "kept elsewhere", env=env)
    assert ran.returncode == 0, ran.stderr
    assert (home / "data" / "raven.db").is_symlink()
    assert elsewhere.stat().st_mode & 0o777 == 0o640
    listed = json.loads(raven("sessions", "list", "--json", env=env).stdout)
    assert [s["title"] for s in listed] == ["kept elsewhere"]
    assert os.path.getsize(elsewhere) > 0  # the store is the file the link names
