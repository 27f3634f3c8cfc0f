"""`python -m raven.demo.frametap LOG -- COMMAND...`: run COMMAND on this process's stdio and
append every line that crosses it to LOG, marked `>` (into COMMAND) or `<` (out of it) and
the milliseconds since the tap started.

For `raven demo`, to show the ACP frames between Raven and a sub-agent. Relays bytes
unchanged; never parses, buffers beyond a line, or alters what it relays.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from typing import IO


def _pump(
    source: IO[bytes],
    sink: IO[bytes],
    log: IO[bytes],
    mark: str,
    lock: threading.Lock,
    started: float,
) -> None:
    try:
        for line in iter(source.readline, b""):
            sink.write(line)
            sink.flush()
            stamp = f"{mark} {(time.monotonic() - started) * 1000:.1f} ".encode()
            with lock:
                log.write(stamp + line if line.endswith(b"\n") else stamp + line + b"\n")
                log.flush()
        sink.close()
    except (BrokenPipeError, ValueError):
        pass  # the other side is gone; the process is ending


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m raven.demo.frametap LOG -- COMMAND...", file=sys.stderr)
        return 2
    lock = threading.Lock()
    started = time.monotonic()
    with open(argv[0], "ab") as log:
        child = subprocess.Popen(argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert child.stdin is not None and child.stdout is not None
        into = threading.Thread(
            target=_pump,
            args=(sys.stdin.buffer, child.stdin, log, ">", lock, started),
            daemon=True,
        )
        into.start()
        _pump(child.stdout, sys.stdout.buffer, log, "<", lock, started)
        return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
