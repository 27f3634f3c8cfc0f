"""Confining one process with the kernel: the ruleset a sandbox level makes for it, and
what the child does with it between fork and exec. Loaded only when a command runs in a
sandbox; `raven.sandbox` says what each level allows.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from raven.sandbox import (
    DEVICES,
    Sandbox,
    SandboxUnavailable,
    enforcement,
    kernel_version,
    landlock,
    scrubbed,
)

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000


def confine(sandbox: Sandbox, cwd: Path, temp: Path | None) -> Confined:
    """`Sandbox.confine`, for a level other than `off`."""
    version = kernel_version()
    if version < 1:
        if sandbox.required:
            raise SandboxUnavailable(
                f"this mode requires the {sandbox.level} sandbox, and this kernel has no "
                "Landlock: the command was not run (`raven config sandbox` says what "
                "this machine enforces)"
            )
        return Confined(None, None, note=f"not sandboxed: {enforcement(sandbox.level)}")
    denied = sandbox.denied()
    listed, readable = landlock.around(Path("/"), denied)
    # The session's own directory is written whole, but for what is denied in it (a
    # session in the home directory): its entries are, not the folders on the way.
    _, writable = landlock.around(cwd, denied)
    own = temp is None
    temp = Path(tempfile.mkdtemp(prefix="raven-sandbox-")) if temp is None else temp
    ports = [_port(a) for a in sandbox.allow]
    isolated = sandbox.level == "strict" and not ports
    ruleset = landlock.Ruleset(
        version,
        reads=readable,
        reads_here=listed,
        writes=[*writable, temp, *map(Path, DEVICES)],
        network=sandbox.level != "strict",
        ports=ports,
    )
    try:
        fd = ruleset.build()
    except BaseException:
        if own:
            shutil.rmtree(temp, ignore_errors=True)
        raise
    return Confined(fd, temp if own else None, isolated, tmpdir=temp)


@dataclass
class Confined:
    """One command's confinement: the ruleset the child restricts itself with before
    exec, and its private temp directory (`TMPDIR`); `release` once it has started."""

    ruleset: int | None
    temp: Path | None
    """Its temp directory, when this confinement made it (and removes it)."""
    isolated: bool = False
    """A network namespace of its own, with nothing in it."""
    note: str = ""
    """What a person is told of it with the command's output (it was not held)."""
    tmpdir: Path | None = None
    """The process's `TMPDIR`."""
    _released: bool = field(default=False, repr=False)

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """`base` as the confined process gets it: without the variables that hold
        credentials, and with its own `TMPDIR` (unchanged when nothing confines it)."""
        if self.ruleset is None or self.tmpdir is None:
            return dict(base)
        return {**scrubbed(base), "TMPDIR": str(self.tmpdir)}

    def preexec(self) -> Callable[[], None] | None:
        """What the child runs between fork and exec (None: nothing)."""
        if self.ruleset is None:
            return None
        return functools.partial(_enter, self.ruleset, self.isolated)

    def release(self) -> None:
        """The child has started (or failed to): the ruleset is not needed here."""
        if self.ruleset is not None and not self._released:
            os.close(self.ruleset)
        self._released = True

    def cleanup(self) -> None:
        """The command is over: its temp directory goes."""
        self.release()
        if self.temp is not None:
            shutil.rmtree(self.temp, ignore_errors=True)


def exec_argv(sandbox: Sandbox, cwd: Path, temp: Path, argv: Sequence[str]) -> list[str]:
    """`argv` run in `sandbox` by way of `python -m raven.sandbox` (for what Raven does not
    start itself: the MCP SDK starts stdio servers), `temp` its temp directory."""
    head = [sys.executable, "-m", "raven.sandbox", "--level", sandbox.level]
    head += ["--cwd", str(cwd), "--temp", str(temp)]
    for path in sandbox.private:
        head += ["--private", str(path)]
    for entry in sandbox.allow:
        head += ["--allow", entry]
    return [*head, "--", *argv]


def _enter(ruleset: int, isolated: bool) -> None:
    """In the child: a network namespace of its own if asked, then the Landlock domain."""
    if isolated:
        libc = landlock.libc()
        flags = _CLONE_NEWNET if os.geteuid() == 0 else _CLONE_NEWUSER | _CLONE_NEWNET
        if libc.unshare(flags) != 0:
            raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNET) failed")
    landlock.restrict(ruleset)


def _port(entry: str) -> int:
    """The port of a `host:port` (or bare port) entry."""
    port = int(entry.rsplit(":", 1)[-1])
    if not 0 < port < 65536:
        raise ValueError(f"not a port: {entry!r}")
    return port
