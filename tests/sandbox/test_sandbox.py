"""Commands in the sandbox (`raven.sandbox`), run as `run_command` runs them: real shells
under the kernel's Landlock, each trying to read a planted credential or write outside
the session's directory."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from raven.sandbox import Sandbox, kernel_version
from raven.tools.shell import run_shell

SECRET = "s3cr3t-planted-key"

needs_landlock = pytest.mark.skipif(
    kernel_version() < 1, reason="this kernel has no Landlock: nothing to hold the sandbox"
)


@dataclass
class World:
    home: Path
    work: Path
    outside: Path
    secret: Path
    private: Path
    """Raven's own config, never read under a sandbox."""


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> World:
    home, work, outside = tmp_path / "home", tmp_path / "work", tmp_path / "outside"
    for folder in (home / ".ssh", work, outside):
        folder.mkdir(parents=True)
    secret = home / ".ssh" / "id_test"
    secret.write_text(SECRET)
    private = home / "raven" / "config.json"
    private.parent.mkdir()
    private.write_text('{"apiKey": "' + SECRET + '"}')
    monkeypatch.setenv("HOME", str(home))
    return World(home, work, outside, secret, private)


async def run(world: World, command: str, sandbox: Sandbox) -> tuple[str, bool]:
    out = await run_shell(command, world.work, 30, 100_000, {"OUT": str(world.outside)}, sandbox)
    return out.text, out.is_error


def workspace(world: World) -> Sandbox:
    return Sandbox("workspace", private=(world.private,))


@needs_landlock
async def test_inside_the_workspace_a_command_works_as_usual(world: World) -> None:
    said, failed = await run(
        world,
        "echo hi > a.txt && mkdir d && mv a.txt d/ && cat d/a.txt && ls / >/dev/null && "
        'echo t > "$TMPDIR/t" && cat "$TMPDIR/t" && rm -r d && git --version >/dev/null',
        workspace(world),
    )
    assert not failed and said.splitlines()[:2] == ["hi", "t"], said


@needs_landlock
async def test_writing_outside_and_reading_a_credential_are_refused(world: World) -> None:
    said, failed = await run(world, f'echo x > "$OUT/x"; cat {world.secret}', workspace(world))
    assert "Permission denied" in said and SECRET not in said and failed
    assert not (world.outside / "x").exists()
    # Without the sandbox, the same command does both.
    said, _ = await run(world, f'echo x > "$OUT/x"; cat {world.secret}', Sandbox())
    assert SECRET in said and (world.outside / "x").exists()


def _escapes() -> Iterator[object]:
    """(name, command) pairs that try to read the secret ($S) or write outside ($OUT)."""
    py = sys.executable
    reads = {
        "cat": 'cat "$S"',
        "relative-dotdot": 'cat "../home/.ssh/id_test"',
        "symlink-to-file": 'ln -s "$S" l && cat l',
        "symlink-to-dir": 'ln -s "$HOME/.ssh" l && cat l/id_test',
        "hard-link": 'ln "$S" h; cat h',
        "copy": 'cp "$S" c; cat c',
        "rename-in": 'mv "$S" m; cat m',
        "proc-self-root": 'cat "/proc/self/root$S"',
        "proc-self-cwd": 'cat "/proc/self/cwd/../home/.ssh/id_test"',
        "proc-1-root": 'cat "/proc/1/root$S"',
        "python-open": f"{py} -c \"print(open('$S').read())\"",
        "child-shell": "sh -c 'cat \"$S\"'",
        "env-i": 'env -i /bin/cat "$S"',
        "setsid": 'setsid cat "$S"',
        "background": '(cat "$S" > bg &); wait; sleep 0.1; cat bg',
        "o-path-reopen": (
            f"{py} -c \"import os; fd=os.open('$S', os.O_PATH); "
            "print(open(f'/proc/self/fd/{fd}').read())\""
        ),
        "unshare-user": 'unshare -r cat "$S"',
        "chroot": 'chroot / cat "$S"',
        "mount-bind": 'mkdir b; mount --bind "$HOME/.ssh" b; cat b/id_test',
        "raven-config": 'cat "$P"',
        "dd": 'dd if="$S" status=none',
        "tar": 'tar cf - "$S" 2>/dev/null | tar xOf - 2>/dev/null',
        "find-exec": 'find "$HOME/.ssh" -type f -exec cat {} \\;',
    }
    writes = {
        "redirect": 'echo x > "$OUT/x"',
        "dotdot-write": "echo x > ../outside/x",
        "symlink-write": 'ln -s "$OUT/x" l; echo x > l',
        "mkdir-outside": 'mkdir "$OUT/x"',
        "touch-tmp": 'touch "$OUT/x" /tmp/raven-escape-x',
        "tee": 'echo x | tee "$OUT/x"',
        "dd-write": 'echo x | dd of="$OUT/x" status=none',
        "mv-out": 'echo x > a; mv a "$OUT/x"',
        "cp-out": 'echo x > a; cp a "$OUT/x"',
        "python-dirfd": (
            f"{py} -c \"import os; d=os.open('$OUT', os.O_PATH|os.O_DIRECTORY); "
            "os.close(os.open('x', os.O_CREAT|os.O_WRONLY, dir_fd=d))\""
        ),
        "authorized-keys": 'echo key >> "$HOME/.ssh/authorized_keys"; touch "$OUT/x"',
        "truncate-secret": ': > "$S"; rm -f "$S"; touch "$OUT/x"',
    }
    for name, command in reads.items():
        yield pytest.param("read", command, id=f"read-{name}")
    for name, command in writes.items():
        yield pytest.param("write", command, id=f"write-{name}")


@needs_landlock
@pytest.mark.parametrize(("kind", "command"), list(_escapes()))
async def test_an_escape_attempt_fails(world: World, kind: str, command: str) -> None:
    env = f'S="{world.secret}"; P="{world.private}"; '
    said, _ = await run(world, env + command, workspace(world))
    assert SECRET not in said, said
    assert not (world.outside / "x").exists() and not Path("/tmp/raven-escape-x").exists()
    assert world.secret.read_text() == SECRET  # nor changed
    assert not (world.home / ".ssh" / "authorized_keys").exists()


@needs_landlock
async def test_a_process_outside_cannot_be_signalled_traced_or_reached_by_its_socket(
    world: World,
) -> None:
    victim = await asyncio.create_subprocess_exec("sleep", "60", env={"SECRET_ENV": SECRET})
    name = f"raven-test-{os.getpid()}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen()
    try:
        said, _ = await run(
            world,
            f"kill -TERM {victim.pid}; cat /proc/{victim.pid}/environ; "
            f'{sys.executable} -c "import socket; s=socket.socket(socket.AF_UNIX); '
            f"s.connect('\\0{name}'); print('connected')\"",
            workspace(world),
        )
        assert "kill: Operation not permitted" in said, said
        assert victim.returncode is None  # still alive: the signal was refused
        assert SECRET not in said and "connected" not in said, said
    finally:
        victim.kill()
        await victim.wait()
        listener.close()


@needs_landlock
async def test_the_environment_keeps_no_credential(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("GH_TOKEN", SECRET)
    said, _ = await run(world, "env", workspace(world))
    assert SECRET not in said and "PATH=" in said


class Listener:
    """A TCP server on a loopback port of the test's own, answering `pong`."""

    def __init__(self) -> None:
        self.server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> Listener:
        async def pong(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writer.write(b"pong\n")
            await writer.drain()
            writer.close()

        self.server = await asyncio.start_server(pong, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()


def connect(port: int) -> str:
    return (
        f"{sys.executable} -c \"import socket; s=socket.create_connection(('127.0.0.1', {port}), "
        'timeout=5); print(s.recv(5).decode().strip())" 2>&1 | tail -1'
    )


@needs_landlock
async def test_strict_allows_only_the_listed_ports(world: World) -> None:
    async with Listener() as allowed, Listener() as other:
        strict = Sandbox("strict", allow=(f"localhost:{allowed.port}",), private=(world.private,))
        said, _ = await run(world, f"{connect(allowed.port)}; {connect(other.port)}", strict)
        first, second = said.splitlines()[:2]
        assert first == "pong", said
        assert "PermissionError" in second or "Permission denied" in second, said
        # With no port allowed, no network at all.
        said, _ = await run(world, connect(allowed.port), Sandbox("strict"))
        assert "pong" not in said
        said, _ = await run(world, connect(other.port), workspace(world))
        assert said.startswith("pong")


async def test_a_mode_that_requires_a_sandbox_the_kernel_lacks_refuses_the_command(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAVEN_SANDBOX_ABI", "0")
    kernel_version.cache_clear()
    try:
        said, failed = await run(world, 'echo ran > "$OUT/ran"', Sandbox().under("strict"))
        assert failed and "requires the strict sandbox" in said
        assert not (world.outside / "ran").exists()
        # Preferred, not required: it runs, and says it was not held.
        said, failed = await run(world, "echo ran", Sandbox("workspace"))
        assert not failed and "not sandboxed: workspace: NOT enforced" in said
    finally:
        monkeypatch.delenv("RAVEN_SANDBOX_ABI")
        kernel_version.cache_clear()


async def test_ravens_own_file_tools_keep_to_the_same_rules(world: World) -> None:
    from raven.config import Limits
    from raven.tools import ToolContext, ToolError
    from raven.tools.files import EditFile, ListDir, ReadFile, WriteFile
    from raven.tools.search import Search

    async def nobody(question: object) -> None:
        return None

    ctx = ToolContext(world.work, Limits(), nobody, sandbox=workspace(world))
    (world.work / "notes.txt").write_text("mine")
    (world.work / "link").symlink_to(world.secret)
    read, write, edit = ReadFile(), WriteFile(), EditFile()
    assert (await read.run(read.args_model(path="notes.txt"), ctx)).text == "mine"
    refused = [
        read.run(read.args_model(path=str(world.secret)), ctx),
        read.run(read.args_model(path="link"), ctx),  # a link to it, from inside
        read.run(read.args_model(path=str(world.private)), ctx),
        ListDir().run(ListDir.args_model(path=str(world.home / ".ssh")), ctx),
        write.run(write.args_model(path=str(world.outside / "x"), content="out"), ctx),
        write.run(write.args_model(path="../outside/x", content="out"), ctx),
        edit.run(edit.args_model(path=str(world.secret), old_text=SECRET, new_text="x"), ctx),
    ]
    for attempt in refused:
        with pytest.raises(ToolError, match="workspace sandbox"):
            await attempt
    assert not (world.outside / "x").exists() and world.secret.read_text() == SECRET
    found = await Search().run(Search.args_model(pattern="s3cr3t", path=str(world.home)), ctx)
    assert SECRET not in found.text
    # Without the sandbox, the same tools reach them.
    free = ToolContext(world.work, Limits(), nobody)
    assert SECRET in (await read.run(read.args_model(path="link"), free)).text
