"""A long-running server's heap: what its start made is kept out of the cyclic garbage
collector's full passes.

A full pass walks every object the collector tracks. In a serving Raven that is mostly
what start-up made and keeps for the process's life: the imported modules, the
configuration, the runtime, over 100,000 objects, 40–100 ms of a stalled event loop
per pass on a 2-core machine (under `bench/a2a.py` such passes set the p99 latency).
Frozen once the server listens, they are never walked again; a pass then walks only
what was made since. Never collects (a pass at start-up would cost as much, and finds
nothing to free there) and never turns the collector off.
"""

from __future__ import annotations

import gc


def settle() -> None:
    """Freeze every object alive now; once, when a server has started serving."""
    gc.freeze()
