"""The sandbox Raven's commands run in: what each level allows, enforced by the kernel.

Levels (`sandbox` in the config, and on a mode, which then requires it):
- `off`: nothing beyond the approval that let the command run;
- `workspace`: writes only in the session's directory and a private temp directory;
  reads everywhere but the credentials of `DENIED` and Raven's own config and data,
  and an environment without the variables that hold credentials;
- `strict`: `workspace`, and no network: a network namespace of its own with nothing
  in it, or, with `sandboxAllowHosts`, TCP to those ports alone.

Landlock (`raven.sandbox.landlock`) holds it: the command, and whatever it starts,
cannot leave it. `Sandbox.confine` says what a command is run with (the function the
child runs before exec, its temp directory); it raises `SandboxUnavailable` when the
kernel cannot hold a level the mode requires. Never parses a command to judge it.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from raven.errors import RavenError

if TYPE_CHECKING:
    from raven.config import Paths, RavenConfig
    from raven.config import SandboxLevel as Level
    from raven.sandbox.confine import Confined

DENIED = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".password-store",
    ".local/share/keyrings",
    ".config/raven",
    ".local/share/raven",
    ".config/gh",
    ".config/hub",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    "snap/firefox",
)
"""Under the home directory: credentials a command never reads under a sandbox."""
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/tty")
"""Written by ordinary commands (`> /dev/null`): writable under a sandbox."""
_SECRET = re.compile(r"(^|_)(API_?KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIALS?)(_|$)", re.I)
"""Environment variables that hold a credential, by their name (`OPENAI_API_KEY`,
`GH_TOKEN`, `AWS_SECRET_ACCESS_KEY`, `GOOGLE_APPLICATION_CREDENTIALS`)."""


class SandboxUnavailable(RavenError):
    """The kernel cannot hold the sandbox level a mode requires: the command is refused
    rather than run outside it."""


@functools.cache
def kernel_version() -> int:
    """The Landlock version of this kernel (0: none), asked once per process;
    `RAVEN_SANDBOX_ABI` stands in for the kernel's answer (a test simulates an old one)."""
    pretend = os.environ.get("RAVEN_SANDBOX_ABI")
    if pretend is not None:
        return int(pretend)
    from raven.sandbox import landlock

    return landlock.abi_version()


LEVELS: tuple[Level, ...] = ("off", "workspace", "strict")
"""From the least held to the most."""


def strictest(*levels: Level | None) -> Level | None:
    """The most held of `levels` (None: none was given)."""
    given = [level for level in levels if level is not None]
    return max(given, key=LEVELS.index) if given else None


def enforcement(level: Level) -> str:
    """What this machine enforces of `level`, in a line for people."""
    version = kernel_version()
    if level == "off":
        return "off: commands run with the user's own rights"
    if version < 1:
        return f"{level}: NOT enforced (this kernel has no Landlock)"
    network = ""
    if level == "strict":
        network = "; no network (a network namespace of its own)"
        if version >= 4:
            network += ", or TCP to the allowed ports alone"
    return f"{level}: enforced by Landlock version {version}{network}"


def capability() -> dict[str, object]:
    """What this machine's kernel lets Raven hold, in the shape of ACP's sandbox RFD
    (`SandboxCapability`): Landlock for files and processes, a network namespace (no
    network) and, from Landlock version 4, TCP by port."""
    version = kernel_version()
    if version < 1:
        guarantees = {"fsIsolation": "none", "netIsolation": "none", "processCaps": False}
        return {"mode": "host", "guarantees": guarantees}
    guarantees = {"fsIsolation": "workspace", "netIsolation": "denyAll", "processCaps": True}
    return {"mode": "custom", "guarantees": guarantees, "landlock": version}


@dataclass(frozen=True)
class Sandbox:
    """The sandbox of a session's commands: its level, whether its mode requires it,
    the TCP ports `strict` allows, and Raven's own files, never read."""

    level: Level = "off"
    required: bool = False
    allow: tuple[str, ...] = ()
    """`sandboxAllowHosts`: `host:port` entries. Landlock tells ports apart, not hosts:
    the port is allowed on any host."""
    private: tuple[Path, ...] = ()

    @classmethod
    def of(cls, config: RavenConfig, paths: Paths) -> Sandbox:
        """The sandbox `config` asks for, with Raven's own files (`paths`) never read: its
        config file, logs, listeners' tokens and data."""
        private = (
            paths.config_file,
            paths.logs_dir,
            paths.config_dir / "gateway.token",  # the gateway's and ACP's listeners'
            paths.config_dir / "acp.token",
            paths.data_dir,
        )
        return cls(config.sandbox, allow=tuple(config.sandbox_allow_hosts), private=private)

    def under(self, mode_level: Level | None) -> Sandbox:
        """This sandbox as a mode (or an agent's entry) that requires `mode_level` has it
        (None: as it is)."""
        if mode_level is None:
            return self
        return Sandbox(mode_level, True, self.allow, self.private)

    @property
    def demanded(self) -> Level | None:
        """The level a mode or a client requires (None: none, or only `off`)."""
        return self.level if self.required and self.level != "off" else None

    def required_at(self, level: Level | None) -> Sandbox | None:
        """The sandbox an agent's entry requires (`level`), on this one's private files;
        None when it requires none."""
        return None if level is None else self.under(level)

    @property
    def enforced(self) -> bool:
        """Whether the kernel holds it (`off` holds nothing, and needs nothing)."""
        return self.level == "off" or kernel_version() >= 1

    @property
    def stated(self) -> dict[str, object]:
        """What a card or a session's answer says of it."""
        return {"level": self.level, "required": self.required, "enforced": self.enforced}

    @property
    def shown(self) -> str:
        """How an approval shows it ("" when off)."""
        if self.level == "off":
            return ""
        held = "" if self.enforced else ", NOT enforced: this kernel has no Landlock"
        return f"runs in the {self.level} sandbox{held}"

    def refusal(self, path: Path, cwd: Path, write: bool) -> str | None:
        """Why Raven's own file tools may not reach `path` under this sandbox (None: they
        may): the rules the kernel holds commands to, checked by Raven for what runs in
        its own process. Writes stay in the session's directory (`cwd`); nothing reads a
        denied path, unless the session itself works inside it."""
        if self.level == "off":
            return None
        real, home = Path(os.path.realpath(path)), Path(os.path.realpath(cwd))
        in_cwd = _within(real, home)
        for denied in self.denied():
            if _within(real, denied) and not (in_cwd and _within(home, denied)):
                return (
                    f"the {self.level} sandbox keeps credentials and Raven's own files out of reach"
                )
        if write and not in_cwd:
            return f"the {self.level} sandbox keeps writes in the session's directory"
        return None

    def confine(self, cwd: Path, temp: Path | None = None) -> Confined | None:
        """What a command in `cwd` runs with (None: no sandbox), with `temp` for its
        temp directory (else a new one, removed with `Confined.cleanup`); raises
        `SandboxUnavailable` when the level is required and the kernel cannot hold it."""
        if self.level == "off":
            return None
        from raven.sandbox.confine import confine  # the kernel's part, loaded when used

        return confine(self, cwd, temp)

    def denied(self) -> tuple[Path, ...]:
        """The paths no command reads, as the kernel sees them (links resolved)."""
        return _denied(str(Path.home()), self.private)


@functools.lru_cache(maxsize=16)
def _denied(home: str, private: tuple[Path, ...]) -> tuple[Path, ...]:
    paths = [*(Path(home) / d for d in DENIED), *private]
    return tuple(Path(os.path.realpath(p)) for p in paths)


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def scrubbed(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the variables that hold credentials: a sandboxed command reads no
    credential from its environment either."""
    return {k: v for k, v in env.items() if not _SECRET.search(k)}
