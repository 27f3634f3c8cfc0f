"""A pseudo-terminal to drive `raven` through, as a person at a keyboard would."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import termios
import time
from collections.abc import Callable
from pathlib import Path

ROWS, COLUMNS = 40, 120
CURSOR_POSITION_REQUEST = "\x1b[6n"
EDITOR_WAITS = "\x1b[?2004h"
"""What the chat's line editor writes as it starts reading a message: bracketed paste on."""
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")


class Terminal:
    def __init__(self, args: list[str], env: dict[str, str], cwd: Path) -> None:
        self.master, slave = pty.openpty()
        # A window of a usual size, as a terminal emulator gives one.
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
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
        self._prompts = 0

    def expect(self, text: str, timeout: float = 15, after: str = "") -> None:
        """Wait until `text` is on the screen (after the last `after`, if given)."""

        def seen() -> bool:
            shown = ANSI.sub("", self.screen)
            if after:
                shown = shown[shown.rfind(after) + len(after) :] if after in shown else ""
            return text in shown

        self._until(seen, timeout, f"{text!r} not seen")

    def prompt(self, timeout: float = 15, after: str = "") -> None:
        """Wait for the chat's line editor to wait for a message (it turns bracketed paste
        on then): each call waits for the next such prompt since the last `mark`, or with
        `after`, for one after the last `after` (keys such as Ctrl-D typed before the
        editor reads are lost, as on any terminal)."""
        if after:
            self._until(
                lambda: (
                    after in self.screen and EDITOR_WAITS in self.screen[self.screen.rfind(after) :]
                ),
                timeout,
                f"no prompt after {after!r}",
            )
            return
        self._prompts += 1
        wanted = self._prompts
        self._until(lambda: self.screen.count(EDITOR_WAITS) >= wanted, timeout, "no prompt")

    def _until(self, done: Callable[[], bool], timeout: float, failure: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"{failure}; screen:\n{ANSI.sub('', self.screen)}")
            ready, _, _ = select.select([self.master], [], [], remaining)
            if ready:
                try:
                    chunk = os.read(self.master, 65536).decode("utf-8", "replace")
                except OSError:
                    break
                self.screen += chunk
                # Where the cursor is, when asked, as a terminal emulator answers (the
                # line editor asks): on the bottom row, where a prompt usually is.
                for _ in range(chunk.count(CURSOR_POSITION_REQUEST)):
                    os.write(self.master, f"\x1b[{ROWS};1R".encode())
        if not done():
            raise AssertionError(f"{failure}; screen:\n{ANSI.sub('', self.screen)}")

    def mark(self) -> None:
        """Forget what was seen so far, so the next expect looks only at new output."""
        self.screen = ""
        self._prompts = 0

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
