"""Packages from npm for tests that drive agents written in JavaScript (pinned versions)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

INSTALL_TIMEOUT_S = 600


def npm_install(
    tmp_path_factory: pytest.TempPathFactory, *packages: str, beside: Sequence[Path] = ()
) -> Path:
    """A folder with `packages` installed (its `node_modules/.bin` holds their commands) and
    the scripts `beside` copied in, so they import those packages.

    Installed once per test run, by whichever worker asks first; the others wait on its
    lock (bounded: the install itself has a deadline). codex-acp alone is 450 MB.
    Without npm the test skips in one line naming what to install; under .ci/run
    (`RAVEN_TEST_STRICT`) it fails instead, since there every test must run.
    """
    if shutil.which("npm") is None:
        missing = "no npm: install Node.js (with npm) to run the agents written in JavaScript"
        if os.environ.get("RAVEN_TEST_STRICT"):
            pytest.fail(missing)
        pytest.skip(missing)
    run = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run = run.parent  # the run's folder, which every worker's own is under
    key = hashlib.sha256("\0".join([*packages, *map(str, beside)]).encode()).hexdigest()
    folder = run / "npm" / key[:16]
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (folder / ".installed").exists():
            quiet = ["--silent", "--no-audit", "--no-fund"]
            install = ["npm", "install", *quiet, "--prefix", str(folder), *packages]
            subprocess.run(install, check=True, capture_output=True, timeout=INSTALL_TIMEOUT_S)
            for script in beside:
                shutil.copy(script, folder / script.name)
            (folder / ".installed").touch()
    return folder
