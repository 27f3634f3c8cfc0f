"""`python -m raven.cli.frametap LOG -- COMMAND...`: run COMMAND on this process's stdio and
append every line that crosses it to LOG, marked `>` (into COMMAND) or `<` (out of it).

For `raven demo`, to show the ACP frames between Raven and a sub-agent. Relays bytes
unchanged; never parses, buffers beyond a line, or alters what it relays.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from typing import IO


def _pump(
    source: IO[bytes], sink: IO[bytes], log: IO[bytes], mark: bytes, lock: threading.Lock
) -> None:
    try:
        for line in iter(source.readline, b""):
            sink.write(line)
            sink.flush()
            with lock:
                log.write(mark + line if line.endswith(b"\n") else mark + line + b"\n")
                log.flush()
        sink.close()
    except (BrokenPipeError, ValueError):
        pass  # the other side is gone; the process is ending


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m raven.cli.frametap LOG -- COMMAND...", file=sys.stderr)
        return 2
    lock = threading.Lock()
    with open(argv[0], "ab") as log:
        child = subprocess.Popen(argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert child.stdin is not None and child.stdout is not None
        into = threading.Thread(
            target=_pump, args=(sys.stdin.buffer, child.stdin, log, b"> ", lock), daemon=True
        )
        into.start()
        _pump(child.stdout, sys.stdout.buffer, log, b"< ", lock)
        return child.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
