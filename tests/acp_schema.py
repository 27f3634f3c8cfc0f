"""The ACP schema Raven's frames are checked against: the TypeScript SDK's (pinned, from
npm), stable v1 and unstable, in one long-lived node process per test worker."""

from __future__ import annotations

import json
import select
import subprocess
from pathlib import Path
from typing import Any, Literal

import pytest

from tests.npm import npm_install

SDK = "@agentclientprotocol/sdk@2.4.0"
"""The SDK whose schemas are pinned: stable v1 1.25 and its unstable additions."""
SCRIPT = Path(__file__).with_name("acp_schema.mjs")
READ_TIMEOUT_S = 60

Version = Literal["stable", "unstable"]


class AcpSchema:
    """`read(items)`: for each (validator, value, version), the SDK's reading
    (`{"ok": …}`) or its complaint (`{"error": …}`)."""

    def __init__(self, tmp_path_factory: pytest.TempPathFactory) -> None:
        folder = npm_install(tmp_path_factory, SDK, beside=[SCRIPT])
        dist = folder / "node_modules/@agentclientprotocol/sdk/dist/v1"
        self._proc = subprocess.Popen(
            ["node", str(folder / SCRIPT.name), str(dist / "schema/zod.gen.js"),
             str(dist / "unstable/schema/zod.gen.js")],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip

    def read(self, items: list[tuple[str, Any, Version]]) -> list[dict[str, Any]]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps(items) + "\n")
        self._proc.stdin.flush()
        ready, _, _ = select.select([self._proc.stdout], [], [], READ_TIMEOUT_S)
        assert ready, f"the schema reader did not answer within {READ_TIMEOUT_S}s"
        line = self._proc.stdout.readline()
        assert line, f"the schema reader exited with {self._proc.wait()}"
        read: list[dict[str, Any]] = json.loads(line)
        return read

    def close(self) -> None:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.close()
        self._proc.wait(10)
        self._proc.stdout.close()
