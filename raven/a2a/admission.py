"""When a task's turn may run: one at a time per conversation, in arrival order, and at
most `maxConcurrentTasks` at once; too many waiting is a reason to reject.

Knows sessions only by id and tasks not at all; never runs anything itself.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from raven.config.schema import A2AServerConfig


@dataclass
class _Conversation:
    turn: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: int = 0


class Admitted:
    """A turn's place: its conversation's turn and a slot, until `leave`."""

    def __init__(self, admission: Admission, session_id: str) -> None:
        self._admission = admission
        self._session_id = session_id
        self._left = False

    def leave(self) -> None:
        """Let the next task of the conversation start (once)."""
        if not self._left:
            self._left = True
            self._admission._leave(self._session_id)


class Admission:
    def __init__(self, settings: A2AServerConfig) -> None:
        self._settings = settings
        self._conversations: dict[str, _Conversation] = {}
        self._slots = asyncio.Semaphore(settings.max_concurrent_tasks)
        self._waiting = 0

    def refusal(self, session_id: str) -> str | None:
        """Why a new task of the conversation would be rejected now, if it would."""
        if self._waiting >= self._settings.max_queued_tasks and self._slots.locked():
            return "Raven is busy: too many tasks are waiting. Try later."
        conversation = self._conversations.get(session_id)
        limit = self._settings.max_queued_per_context
        if conversation is not None and conversation.waiting >= limit:
            return (
                f"This conversation already has {limit} tasks waiting behind the running "
                "one; wait for them to finish, or start another conversation."
            )
        return None

    async def enter(self, session_id: str, cancelled: asyncio.Event) -> Admitted | None:
        """Wait for the conversation's turn, then a slot; None when `cancelled` first."""
        conversation = self._conversations.setdefault(session_id, _Conversation())
        conversation.waiting += 1
        try:
            held = await _take(conversation.turn, cancelled)
        finally:
            conversation.waiting -= 1
        if not held:
            self._forget(session_id)
            return None
        self._waiting += 1
        try:
            await self._slots.acquire()
        except BaseException:
            conversation.turn.release()
            self._forget(session_id)
            raise
        finally:
            self._waiting -= 1
        return Admitted(self, session_id)

    def _leave(self, session_id: str) -> None:
        self._slots.release()
        conversation = self._conversations.get(session_id)
        if conversation is not None:
            conversation.turn.release()
            self._forget(session_id)

    def _forget(self, session_id: str) -> None:
        conversation = self._conversations.get(session_id)
        if conversation is not None and not conversation.turn.locked() and not conversation.waiting:
            del self._conversations[session_id]


async def _take(lock: asyncio.Lock, cancelled: asyncio.Event) -> bool:
    """Acquire `lock` in its turn unless `cancelled` is set first; True when it is held."""
    if cancelled.is_set():
        return False
    if not lock.locked():  # free, so nobody waits for it: taken without a wait
        await lock.acquire()
        return True
    wanted = asyncio.ensure_future(lock.acquire())
    stop = asyncio.ensure_future(cancelled.wait())
    held = False
    try:
        await asyncio.wait([wanted, stop], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not wanted.done():
            wanted.cancel()
        elif not wanted.cancelled():
            held = not (cancelled.is_set() or _being_cancelled())
            if not held:
                lock.release()
    return held


def _being_cancelled() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0
