"""Who holds a claim (`raven.holders`): a process of this machine is gone the moment it
stops running, before its parent has reaped it too."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from raven.holders import gone, parse, this_holder


def test_a_live_process_holds_and_a_killed_one_does_not_even_unreaped() -> None:
    child = subprocess.Popen(["sleep", "60"])
    try:
        held = {**parse(this_holder()), "pid": child.pid}
        assert not gone(held) and not gone(parse(this_holder()))
        os.kill(child.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10  # the kernel's, not a pause: until it has exited
        while not gone(held) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gone(held)
        assert child.returncode is None  # still not reaped: a zombie, and gone all the same
    finally:
        child.kill()
        child.wait()
    assert gone(held)  # reaped: no such process
    assert not gone({**held, "host": "elsewhere"})  # another machine's: only its lease tells
