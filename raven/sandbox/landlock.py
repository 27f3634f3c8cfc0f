"""Linux Landlock through its system calls (no native dependency): which version the
kernel speaks, a ruleset built from paths and TCP ports, and restricting the calling
process with it (for a child about to exec: `restrict` runs between fork and exec).

Never restricts Raven itself: `restrict` is only ever called in a child.
"""

from __future__ import annotations

import ctypes
import errno
import functools
import os
import platform
import stat
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

_SYSCALLS = {"x86_64": (444, 445, 446), "aarch64": (444, 445, 446)}
"""landlock_create_ruleset, landlock_add_rule, landlock_restrict_self (the same numbers
on every architecture that has them)."""
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_RULE_NET_PORT = 2
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP = 24
_PAST_LANDLOCK = (12, 16, 17, 19, 21, 22, 25, 33, 38, 39)
"""CAP_NET_ADMIN, CAP_SYS_MODULE, CAP_SYS_RAWIO, CAP_SYS_PTRACE, CAP_SYS_ADMIN,
CAP_SYS_BOOT, CAP_SYS_TIME, CAP_MAC_ADMIN, CAP_PERFMON, CAP_BPF."""

# Filesystem rights, by the version that brought them.
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # version 2
TRUNCATE = 1 << 14  # version 3
IOCTL_DEV = 1 << 15  # version 5
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
"""The rights a rule on a file (not a directory) may carry."""
READ = EXECUTE | READ_FILE | READ_DIR | IOCTL_DEV
WRITE = (
    WRITE_FILE
    | REMOVE_DIR
    | REMOVE_FILE
    | MAKE_CHAR
    | MAKE_DIR
    | MAKE_REG
    | MAKE_SOCK
    | MAKE_FIFO
    | MAKE_BLOCK
    | MAKE_SYM
    | REFER
    | TRUNCATE
)
# Network rights (version 4) and scopes (version 6).
BIND_TCP = 1 << 0
CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0
SCOPE_SIGNAL = 1 << 1


class LandlockUnavailable(OSError):
    """The kernel cannot confine a process with Landlock (too old, disabled, or a
    container that forbids it)."""


@functools.cache
def libc() -> ctypes.CDLL:
    """The C library, loaded once: a child about to exec finds it loaded."""
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The Landlock version this kernel speaks; 0 when it has none."""
    numbers = _SYSCALLS.get(platform.machine())
    if numbers is None:
        return 0
    version = libc().syscall(numbers[0], None, ctypes.c_size_t(0), _CREATE_RULESET_VERSION)
    return max(int(version), 0)


def fs_rights(version: int) -> int:
    """Every filesystem right `version` knows (all of them are handled: an unhandled right
    would be left unrestricted)."""
    rights = (1 << 13) - 1
    if version >= 2:
        rights |= REFER
    if version >= 3:
        rights |= TRUNCATE
    if version >= 5:
        rights |= IOCTL_DEV
    return rights


@dataclass
class Ruleset:
    """What a confined process may do: paths and what beneath each, TCP ports to connect
    to. Everything else its version can restrict is denied."""

    version: int
    reads: list[Path] = field(default_factory=list)
    """Read, list and run anything beneath."""
    reads_here: list[Path] = field(default_factory=list)
    """List this directory (and directories beneath it) only: the way to what is readable
    beneath it, around what is not."""
    writes: list[Path] = field(default_factory=list)
    """Everything beneath: read, write, create, remove."""
    network: bool = True
    """False: TCP connect and bind are denied but to `ports`."""
    ports: list[int] = field(default_factory=list)

    def build(self) -> int:
        """The ruleset as a file descriptor (close-on-exec) for `restrict`; raises
        `LandlockUnavailable`. Paths that do not exist are left out."""
        if self.version < 1:
            raise LandlockUnavailable(errno.ENOSYS, "this kernel has no Landlock")
        create, add, _ = _SYSCALLS[platform.machine()]
        handled = fs_rights(self.version)
        net = BIND_TCP | CONNECT_TCP if not self.network and self.version >= 4 else 0
        scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if self.version >= 6 else 0
        attr = struct.pack("=QQQ", handled, net, scoped)
        size = 24 if self.version >= 6 else 16
        c = libc()
        fd = c.syscall(create, ctypes.c_char_p(attr), ctypes.c_size_t(size), 0)
        if fd < 0:
            raise LandlockUnavailable(ctypes.get_errno(), "landlock_create_ruleset failed")
        try:
            for paths, rights in (
                (self.reads_here, READ_DIR),
                (self.reads, READ),
                (self.writes, READ | WRITE),
            ):
                for path in paths:
                    self._beneath(c, add, fd, path, rights & handled)
            for port in self.ports if net else ():
                rule = struct.pack("=QQ", CONNECT_TCP, port)
                if c.syscall(add, fd, _RULE_NET_PORT, ctypes.c_char_p(rule), 0) < 0:
                    raise OSError(ctypes.get_errno(), f"landlock: cannot allow port {port}")
        except BaseException:
            os.close(fd)
            raise
        return int(fd)

    @staticmethod
    def _beneath(c: ctypes.CDLL, add: int, fd: int, path: Path, rights: int) -> None:
        try:
            opened = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return  # gone, or never there: nothing to allow
        try:
            if not stat.S_ISDIR(os.fstat(opened).st_mode):
                rights &= FILE_RIGHTS
            rule = struct.pack("=Qi", rights, opened)
            if c.syscall(add, fd, _RULE_PATH_BENEATH, ctypes.c_char_p(rule), 0) < 0:
                raise OSError(ctypes.get_errno(), f"landlock: cannot allow {path}")
        finally:
            os.close(opened)


def restrict(ruleset_fd: int) -> None:
    """Confine the calling process (and whatever it runs) with the ruleset, for good.
    Called in a child between fork and exec; raises OSError when the kernel refuses.

    A process running as root also loses, for what it runs, the capabilities that reach
    past Landlock (tracing other processes, loading kernel modules, raw devices, the
    system's administration); a process without them has nothing to lose."""
    c = libc()
    for capability in _PAST_LANDLOCK:
        c.prctl(_PR_CAPBSET_DROP, capability, 0, 0, 0)  # EPERM without CAP_SETPCAP
    if c.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    if c.syscall(_SYSCALLS[platform.machine()][2], ruleset_fd, 0) != 0:
        raise OSError(ctypes.get_errno(), "landlock_restrict_self failed")


def around(root: Path, denied: Iterable[Path]) -> tuple[list[Path], list[Path]]:
    """All of `root` but what is `denied` beneath it, as Landlock's rules can say it (they
    only ever add): the directories on the way to a denied path, to list, and each of
    their other entries, whole. Without a denied path beneath it: `root` itself, whole.

    Paths are compared as the kernel sees them (symlinks resolved): an entry that is a
    link to a denied path, into one, or to a folder holding one is left out too, as a
    rule on it would hold the denied path beneath it."""
    top = os.path.realpath(root)
    blocked = {os.path.realpath(p) for p in denied}
    holding = {parent for p in blocked for parent in _parents(p)}
    inside = top.rstrip("/") + "/"
    if not any(p == top or p.startswith(inside) for p in blocked):
        return [], [Path(top)]  # a session inside a denied folder still has its own files
    on_the_way = sorted(d for d in holding if d == top or d.startswith(inside))
    whole = []
    for directory in on_the_way:
        try:
            entries = os.scandir(directory)
        except OSError:
            continue
        with entries:
            for entry in entries:
                path = entry.path
                if path in blocked or path in holding:
                    continue
                if entry.is_symlink() and _touches(os.path.realpath(path), blocked, holding):
                    continue
                whole.append(Path(path))
    return [Path(d) for d in on_the_way], whole


def _parents(path: str) -> Iterator[str]:
    """`path`'s folders, up to `/`."""
    while path != "/":
        path = os.path.dirname(path)
        yield path


def _touches(path: str, blocked: set[str], holding: set[str]) -> bool:
    """Whether a rule on `path` would reach a blocked path: it is one, is in one, or holds
    one."""
    return path in blocked or path in holding or any(p in blocked for p in _parents(path))
