import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console

from raven.demo import tour as demo_module
from raven.demo.tour import Demo


@pytest.fixture
def demo() -> Iterator[Demo]:
    made = Demo(Console(quiet=True), web=False)
    made.work.mkdir()
    saved = signal.signal(signal.SIGINT, made.interrupts.arrived)
    try:
        yield made
    finally:
        signal.signal(signal.SIGINT, saved)
        made.close(keep=False)


def test_ctrl_c_as_a_child_starts_still_stops_that_child(
    demo: Demo, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_popen = subprocess.Popen

    def interrupted_popen(*args: Any, **kwargs: Any) -> subprocess.Popen[str]:
        child = real_popen(*args, **kwargs)
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C just after the fork
        return child

    monkeypatch.setattr(demo_module.subprocess, "Popen", interrupted_popen)
    with pytest.raises(KeyboardInterrupt):
        demo.spawn([sys.executable, "-c", "import time; time.sleep(60)"], demo.root)
    (child,) = demo.procs  # recorded before the interrupt was let through
    assert child.poll() is None
    demo.close(keep=False)
    assert child.returncode is not None
