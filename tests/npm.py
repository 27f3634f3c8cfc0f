"""Packages from npm for tests that drive agents written in JavaScript (pinned versions)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest


def npm_install(folder: Path, *packages: str) -> Path:
    """`packages` installed under `folder` (its `node_modules/.bin` holds their commands).

    Without npm the test skips in one line naming what to install; under .ci/run
    (`RAVEN_TEST_STRICT`) it fails instead, since there every test must run.
    """
    if shutil.which("npm") is None:
        missing = "no npm: install Node.js (with npm) to run the agents written in JavaScript"
        if os.environ.get("RAVEN_TEST_STRICT"):
            pytest.fail(missing)
        pytest.skip(missing)
    quiet = ["--silent", "--no-audit", "--no-fund"]
    install = ["npm", "install", *quiet, "--prefix", str(folder), *packages]
    subprocess.run(install, check=True, capture_output=True, timeout=600)
    return folder
