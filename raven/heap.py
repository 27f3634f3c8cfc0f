"""A long-running server's heap: what its start made is kept out of the cyclic garbage
collector's full passes, and what a big turn freed is given back to the system.

A full pass walks every object the collector tracks. In a serving Raven that is mostly
what start-up made and keeps for the process's life: the imported modules, the
configuration, the runtime, over 100,000 objects, 40–100 ms of a stalled event loop
per pass on a 2-core machine (under `bench/a2a.py` such passes set the p99 latency).
Frozen once the server listens, they are never walked again; a pass then walks only
what was made since. Never collects (a pass at start-up would cost as much, and finds
nothing to free there) and never turns the collector off.

glibc's allocator keeps the pages of freed memory when what is still in use sits
between them: after a 50 MB answer left memory, a gateway kept about 80 MiB it no longer
used until `give_back` asked glibc to return them (`malloc_trim`).
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable


def settle() -> None:
    """Freeze every object alive now; once, when a server has started serving."""
    gc.freeze()


def give_back() -> None:
    """Return the heap's free pages to the system: after something big left memory (some
    milliseconds for a heap of hundreds of MiB). Nothing where the C library is not glibc."""
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    import ctypes  # only once something big was let go

    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS)
        return None
    return trim
