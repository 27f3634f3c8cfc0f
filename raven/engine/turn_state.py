"""One turn's state in this process, from its reservation to its end: one object, one machine.

```
reserved ──claimed──▶ claimed ──working──▶ working ──work_over──▶ stopping ──end──▶ ended
    │                    │                    │                      ▲
    │                    │                    └───────cancel─────────┤
    │                    └────────work_over (cancelled, failed)──────┘
    └──────────────────────────────end (the claim refused)───────────────────▶ ended
```

- **reserved**: the session is taken for the turn in this process (a second turn is
  refused); the session's claim is not held yet (another process's turn may still run).
- **claimed**: the claim is held (for a session not stored yet, there is none to hold);
  the prompt is being stored.
- **working**: the work task runs the model and the tools; `cancel` cancels it.
- **stopping**: the work is over (done, failed, or cancelled); the turn stores its end
  and lets the claim go.
- **ended**: the session is free; `ended` is set.

`cancel` may come in any state: it sets `cancelled` (the claim's wait and the start of
the work look at it) and, while working, cancels the work task. Holds the cancel, the
claim, the idle event, the work task, the turn's running tool calls and the steering
waiting for its next model call. Never stores, never runs anything: `raven.engine.turn`
moves it through `LiveSession`, and a move out of order is a bug, raised at once.
"""

from __future__ import annotations

import asyncio
import enum
from typing import Any

from raven.tools import Parts


class Phase(enum.Enum):
    RESERVED = "reserved"
    CLAIMED = "claimed"
    WORKING = "working"
    STOPPING = "stopping"
    ENDED = "ended"


class TurnState:
    def __init__(self) -> None:
        self.phase = Phase.RESERVED
        self.cancelled = asyncio.Event()
        """Set by `cancel`: the turn is to stop wherever it is."""
        self.ended = asyncio.Event()
        """Set once the turn has ended and the session is free (the idle event)."""
        self.holds_claim = False
        """This process holds the session's claim for the turn."""
        self.steering: list[str] = []
        """Text for the turn's next model call."""
        self.calls: dict[str, tuple[asyncio.Task[Any], Parts]] = {}
        """The turn's tool calls that run, by call id: what `cancel_call` cancels."""
        self._work: asyncio.Task[Any] | None = None
        self._cut = False
        """`cancel` cancelled the work task (it is uncancelled once it stops)."""

    def claimed(self, held: bool) -> None:
        """The claim is the turn's (`held`: there was one to take)."""
        self._move(Phase.CLAIMED, Phase.RESERVED)
        self.holds_claim = held

    def working(self, task: asyncio.Task[Any]) -> None:
        """`task` does the turn's work from now on; raises `CancelledError` if the turn was
        stopped already."""
        if self.cancelled.is_set():
            raise asyncio.CancelledError
        self._move(Phase.WORKING, Phase.CLAIMED)
        self._work = task

    def cancel(self) -> bool:
        """Stop the turn wherever it is; False once it has ended."""
        if self.phase is Phase.ENDED:
            return False
        self.cancelled.set()
        if self.phase is Phase.WORKING and self._work is not None:
            self.phase, self._cut = Phase.STOPPING, True
            self._work.cancel()
        return True

    def work_over(self, task: asyncio.Task[Any]) -> bool:
        """The work is over; True when the turn was stopped by `cancel` alone (nothing but
        `cancel` cancelled `task`, which is uncancelled)."""
        self._move(Phase.STOPPING, Phase.CLAIMED, Phase.WORKING, Phase.STOPPING)
        if self._cut:
            task.uncancel()
        self._work, self._cut = None, False
        return self.cancelled.is_set() and not task.cancelling()

    def release(self) -> bool:
        """The claim is let go; True when it was held."""
        held, self.holds_claim = self.holds_claim, False
        return held

    def end(self) -> None:
        """The turn is over, from any state (idempotent)."""
        self.phase, self._work, self.holds_claim = Phase.ENDED, None, False
        self.steering.clear()
        self.ended.set()

    def _move(self, to: Phase, *allowed: Phase) -> None:
        if self.phase not in allowed:
            raise RuntimeError(f"a turn cannot go from {self.phase.value} to {to.value}")
        self.phase = to
