"""Ending asyncio work within a deadline.

What has not finished by the deadline is cancelled and given the same time again to
unwind; what still runs after that is left to the loop's end. Never raises for the
work's own errors (its owner reads them, or logs them where it runs).
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from typing import Any


async def finish_within(work: Collection[asyncio.Future[Any]], timeout_s: float) -> None:
    if not work:
        return
    _, pending = await asyncio.wait(work, timeout=timeout_s)
    for stuck in pending:
        stuck.cancel()
    if pending:
        await asyncio.wait(pending, timeout=timeout_s)
