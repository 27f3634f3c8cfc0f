"""A pseudo-terminal to drive `raven` through, as a person at a keyboard would."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import subprocess
import termios
import time
from pathlib import Path

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


class Terminal:
    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            args,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=cwd,
            preexec_fn=_take_terminal,
        )
        os.close(slave)
        self.screen = ""

    def expect(self, text: str, timeout: float = 15, after: str = "") -> None:
        """Wait until `text` is on the screen (after the last `after`, if given)."""
        deadline = time.monotonic() + timeout

        def seen() -> bool:
            shown = ANSI.sub("", self.screen)
            if after:
                shown = shown[shown.rfind(after) + len(after) :] if after in shown else ""
            return text in shown

        while not seen():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{text!r} not seen; screen:\n{ANSI.sub('', self.screen)}")
            ready, _, _ = select.select([self.master], [], [], remaining)
            if ready:
                try:
                    self.screen += os.read(self.master, 65536).decode("utf-8", "replace")
                except OSError:
                    break
        if not seen():
            raise AssertionError(f"{text!r} not seen; screen:\n{ANSI.sub('', self.screen)}")

    def mark(self) -> None:
        """Forget what was seen so far, so the next expect looks only at new output."""
        self.screen = ""

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        os.close(self.master)


def _take_terminal() -> None:
    """In the child: a new session whose controlling terminal is the pty, so ^C is SIGINT."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
