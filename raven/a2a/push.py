"""Push notifications: a task's webhook configs, and delivering its updates to them.

Configs live in the SDK's push config store beside the tasks (in memory, or in the
shared database, so they outlive a restart and every replica sees them), scoped to
their owner. Each one gets a token if it came without one: the token is the key of the
signature on every notification (Standard Webhooks: `webhook-id`, `webhook-timestamp`,
`webhook-signature: v1,<base64 HMAC-SHA256 over "id.timestamp.body">`), and is sent as
`X-A2A-Notification-Token` and `A2A-Notification-Token` (the Python and Go SDKs' two
spellings). `authentication` becomes the `Authorization` header.

Every update the task service writes (the task, its status, its artifacts) is one
notification, a `StreamResponse` as JSON, delivered to each of the task's configs in
order, by a worker of that config's own: delivery never blocks a task, and one slow
receiver never delays another. An attempt fails on a network error, a timeout, a
redirect (never followed) or a status other than 2xx; 5xx, 408, 425 and 429 are tried
again, up to `attempts`, after an exponential backoff with jitter. After
`disableAfter` notifications in a row that failed, the config is disabled (re-create
it to enable it again). What happened (deliveries, failures, the last error, disabled)
is kept per config and shown in GetTask's `metadata.raven.push`.

Where a notification may go is `raven.a2a.push_targets`'s rule. Never writes a task.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import hashlib
import hmac
import json
import logging
import random
import secrets
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from a2a.helpers import new_text_part
from a2a.server.context import ServerCallContext
from a2a.server.events import Event
from a2a.server.tasks import InMemoryPushNotificationConfigStore, PushNotificationConfigStore
from a2a.types import Task, TaskArtifactUpdateEvent, TaskPushNotificationConfig
from a2a.utils.proto_utils import to_stream_response

from raven.a2a.push_targets import GuardedResolver, PushRefused, PushTargets
from raven.a2a.store import RowsPushConfigs, StoreOutage, unreachable
from raven.a2a.wire import to_json
from raven.config import A2APushConfig
from raven.deadlines import finish_within

if TYPE_CHECKING:
    import aiohttp

    from raven.engine import TaskRows

log = logging.getLogger(__name__)

STORE_RETRY_S = 5.0
"""How long an update's dispatch tries a task store out of reach (a database restart)."""
STORE_RETRY_PAUSE_S = 0.2
RESPONSE_LIMIT = 64 * 1024
"""How much of a receiver's answer is read (and thrown away)."""
QUEUE_LIMIT = 256
"""Notifications waiting for one config; more are dropped (and counted)."""
CLOSE_S = 2.0
"""How long stopping waits for the notifications still on their way."""
_RETRIED = frozenset({408, 425, 429})

__all__ = ["Delivery", "Push", "PushRefused"]


@dataclass
class Delivery:
    """What happened to one config's notifications."""

    delivered: int = 0
    failed_attempts: int = 0
    failed_in_a_row: int = 0
    """Notifications in a row that failed every attempt."""
    dropped: int = 0
    last_success: str | None = None
    last_error: str | None = None
    disabled: bool = False

    def as_json(self) -> dict[str, Any]:
        words = {"failed_attempts": "failedAttempts", "failed_in_a_row": "failedInARow"}
        words |= {"last_success": "lastSuccess", "last_error": "lastError"}
        return {words.get(k, k): v for k, v in asdict(self).items() if v is not None}


class _MemoryLog:
    def __init__(self) -> None:
        self._states: dict[str, dict[str, Delivery]] = {}

    async def get(self, task_id: str) -> dict[str, Delivery]:
        return {k: Delivery(**asdict(v)) for k, v in self._states.get(task_id, {}).items()}

    async def change(
        self, task_id: str, config_id: str, how: Callable[[Delivery], None]
    ) -> Delivery:
        state = self._states.setdefault(task_id, {}).setdefault(config_id, Delivery())
        how(state)
        return Delivery(**asdict(state))

    async def drop(self, task_id: str, config_id: str | None) -> None:
        if config_id is None:
            self._states.pop(task_id, None)
        else:
            self._states.get(task_id, {}).pop(config_id, None)


class _RowsLog:
    """The delivery states beside the push configs, in the task store's rows: a config set
    again starts afresh there."""

    def __init__(self, rows: TaskRows) -> None:
        self._rows = rows

    async def get(self, task_id: str) -> dict[str, Delivery]:
        found = await self._rows.delivery_get(task_id)
        return {config_id: Delivery(**json.loads(state)) for config_id, state in found.items()}

    async def change(
        self, task_id: str, config_id: str, how: Callable[[Delivery], None]
    ) -> Delivery:
        """Apply `how` to the config's state in one transaction, the row locked (replicas
        delivering to one config at once each count theirs)."""
        changed = Delivery()

        def apply(found: str | None) -> str:
            nonlocal changed
            changed = Delivery(**json.loads(found)) if found else Delivery()
            how(changed)
            return json.dumps(asdict(changed))

        await self._rows.delivery_change(task_id, config_id, apply)
        return changed

    async def drop(self, task_id: str, config_id: str | None) -> None:
        """Nothing: the state goes with its config's row, or starts afresh when it is set."""


@dataclass
class _Note:
    task_id: str
    event_id: str
    body: bytes


MAX_CONFIGS_PER_TASK = 10
"""Push configs one task takes (a peer could otherwise make every update fan out to
thousands of URLs); re-creating one by its id replaces it."""


class _Outbox:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[tuple[TaskPushNotificationConfig, _Note]] = asyncio.Queue(
            QUEUE_LIMIT
        )
        self.worker: asyncio.Task[None] | None = None
        self.dropped = 0


class Push:
    def __init__(
        self,
        settings: A2APushConfig,
        rows: TaskRows | None = None,
        pushed: set[str] | None = None,
    ) -> None:
        """Configs and their delivery states in memory, or in the task store's `rows`,
        which keeps in `pushed` the tasks it last wrote with configs."""
        self._settings = settings
        self.targets = PushTargets(settings.allow_private)
        self._store: PushNotificationConfigStore = (
            InMemoryPushNotificationConfigStore() if rows is None else RowsPushConfigs(rows)
        )
        self._log: _MemoryLog | _RowsLog = _MemoryLog() if rows is None else _RowsLog(rows)
        self._configured: set[str] = set() if pushed is None else pushed
        """Tasks that have configs: the other tasks' updates cost nothing."""
        self._states_elsewhere = rows is not None
        """Other processes deliver too: the states are read, whoever wrote the task."""
        self._inbox: asyncio.Queue[tuple[str, Event] | None] = asyncio.Queue()
        self._dispatcher: asyncio.Task[None] | None = None
        self._outboxes: dict[tuple[str, str], _Outbox] = {}
        self._session: aiohttp.ClientSession | None = None

    # -- configs ----------------------------------------------------------------------

    async def create(
        self, task_id: str, config: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        """Store `config` for the task (replacing one with its id); raises PushRefused."""
        await self.targets.check(config.url)
        if config.HasField("authentication") and not config.authentication.scheme:
            raise PushRefused("the push config's authentication has no scheme")
        given = TaskPushNotificationConfig()
        given.CopyFrom(config)
        held = await self._store.get_info(task_id, context)
        if len(held) >= MAX_CONFIGS_PER_TASK and all(c.id != given.id for c in held):
            raise PushRefused(
                f"a task takes at most {MAX_CONFIGS_PER_TASK} push configs; "
                "delete one before adding another"
            )
        if not given.token:
            given.token = secrets.token_urlsafe(32)
        stored = await self._store.set_info(task_id, given, context)
        assert stored is not None
        await self._log.drop(task_id, stored.id)  # a re-created config starts afresh
        self._configured.add(task_id)
        return stored

    async def get(
        self, task_id: str, config_id: str, context: ServerCallContext
    ) -> TaskPushNotificationConfig | None:
        for config in await self._store.get_info(task_id, context):
            if config.id == config_id:
                return config
        return None

    async def configs(
        self, task_id: str, context: ServerCallContext
    ) -> list[TaskPushNotificationConfig]:
        return list(await self._store.get_info(task_id, context))

    async def delete(self, task_id: str, config_id: str, context: ServerCallContext) -> None:
        await self._store.delete_info(task_id, context, config_id)
        await self._log.drop(task_id, config_id)

    async def states(self, task_id: str) -> dict[str, Delivery]:
        """Each config's delivery so far, by config id."""
        if not self._states_elsewhere and task_id not in self._configured:
            return {}
        return await self._log.get(task_id)

    # -- delivery ---------------------------------------------------------------------

    def notify(self, task_id: str, event: Event) -> None:
        """Deliver `event` to the task's configs, later: never waits."""
        if task_id not in self._configured:
            return
        if self._dispatcher is None:
            self._dispatcher = asyncio.create_task(self._dispatch(), name="a2a:push")
        self._inbox.put_nowait((task_id, _copy(event)))

    async def aclose(self) -> None:
        """Send what is on its way, for up to `CLOSE_S`, then stop."""
        work = [o.worker for o in self._outboxes.values() if o.worker is not None]
        if self._dispatcher is not None:
            self._inbox.put_nowait(None)
            work.append(self._dispatcher)
        await finish_within(work, CLOSE_S)
        if self._session is not None:
            await self._session.close()

    async def _dispatch(self) -> None:
        """Hand each update, in order, to the outbox of each of its task's configs; a
        store out of reach (a database restart) is tried again for `STORE_RETRY_S`."""
        outage = StoreOutage(log, "push: dispatching updates")
        while (item := await self._inbox.get()) is not None:
            task_id, event = item
            try:
                found = await self._targets(task_id)
            except Exception as exc:
                log.warning("push: task %s's update could not be dispatched", task_id)
                outage.failed(exc)
                continue
            outage.worked()
            note = _Note(task_id, uuid.uuid4().hex, self._body(event))
            for config in found:
                self._post(config, note)

    async def _targets(self, task_id: str) -> list[TaskPushNotificationConfig]:
        """The task's configs not disabled, from the stores."""
        deadline = time.monotonic() + STORE_RETRY_S
        while True:
            try:
                configs = await self._store.get_info_for_dispatch(task_id)
                states = await self._log.get(task_id) if configs else {}
            except Exception as exc:
                if not unreachable(exc) or time.monotonic() >= deadline:
                    raise
                await asyncio.sleep(STORE_RETRY_PAUSE_S)
                continue
            return [c for c in configs if not states.get(c.id, Delivery()).disabled]

    def _post(self, config: TaskPushNotificationConfig, note: _Note) -> None:
        key = (note.task_id, config.id)
        outbox = self._outboxes.get(key)
        if outbox is None:
            outbox = self._outboxes[key] = _Outbox()
            outbox.worker = asyncio.create_task(self._work(key, outbox), name="a2a:push:send")
        try:
            outbox.queue.put_nowait((config, note))
        except asyncio.QueueFull:
            outbox.dropped += 1
            log.warning("push: config %s of task %s is behind; an update is dropped", *key[::-1])

    async def _work(self, key: tuple[str, str], outbox: _Outbox) -> None:
        """Send the outbox's notifications in order; it goes once it is empty."""
        try:
            while not outbox.queue.empty():
                config, note = outbox.queue.get_nowait()
                try:
                    error = await self._send(config, note)
                    state = await self._record(note.task_id, config.id, error, outbox)
                except Exception:  # the state's store failed: the next notification goes on
                    log.exception("push: delivering to config %s of task %s failed", *key[::-1])
                    continue
                if state.disabled:
                    log.warning(
                        "push: config %s of task %s is disabled after %d failed notifications",
                        config.id,
                        note.task_id,
                        state.failed_in_a_row,
                    )
                    return
        finally:
            self._outboxes.pop(key, None)

    async def _record(
        self, task_id: str, config_id: str, error: str | None, outbox: _Outbox
    ) -> Delivery:
        dropped, outbox.dropped = outbox.dropped, 0

        def how(state: Delivery) -> None:
            state.dropped += dropped
            if error is None:
                state.delivered += 1
                state.failed_in_a_row = 0
                state.last_success = datetime.now(UTC).isoformat(timespec="seconds")
            else:
                state.failed_in_a_row += 1
                state.last_error = error
                state.disabled = state.failed_in_a_row >= self._settings.disable_after

        return await self._log.change(task_id, config_id, how)

    async def _send(self, config: TaskPushNotificationConfig, note: _Note) -> str | None:
        """Deliver `note`, trying again as the settings say; None, or the last error."""
        settings = self._settings
        error: str | None = None
        for attempt in range(settings.attempts):
            if attempt:
                ceiling = min(settings.retry_max_s, settings.retry_base_s * 2 ** (attempt - 1))
                await asyncio.sleep(ceiling * random.uniform(0.5, 1.0))
            error, again = await self._attempt(config, note)
            if error is None:
                return None
            await self._log.change(note.task_id, config.id, functools.partial(_failed, error))
            log.info("push: config %s of task %s: %s", config.id, note.task_id, error)
            if not again:
                break
        return error

    async def _attempt(
        self, config: TaskPushNotificationConfig, note: _Note
    ) -> tuple[str | None, bool]:
        """One POST: None or what went wrong, and whether trying again may help."""
        import aiohttp

        try:
            self.targets.check_url(config.url)  # an address in the URL never meets the resolver
        except PushRefused as refused:
            return str(refused), False
        timestamp = str(int(time.time()))
        signed = f"{note.event_id}.{timestamp}.".encode() + note.body
        signature = hmac.new(config.token.encode(), signed, hashlib.sha256).digest()
        headers = {
            "Content-Type": "application/json",
            "webhook-id": note.event_id,
            "webhook-timestamp": timestamp,
            "webhook-signature": "v1," + base64.b64encode(signature).decode(),
            "X-A2A-Notification-Token": config.token,
            "A2A-Notification-Token": config.token,
        }
        if config.HasField("authentication") and config.authentication.credentials:
            auth = config.authentication
            headers["Authorization"] = f"{auth.scheme} {auth.credentials}"
        try:
            async with self._client().post(
                config.url,
                data=note.body,
                headers=headers,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=self._settings.timeout_s),
            ) as response:
                await response.content.read(RESPONSE_LIMIT)
                status = response.status
        except TimeoutError:
            return f"no answer within {self._settings.timeout_s:g} s", True
        except (aiohttp.ClientError, OSError) as exc:
            return _describe(exc), True
        if 200 <= status < 300:
            return None, False
        if 300 <= status < 400:
            return f"HTTP {status}: a redirect, which Raven does not follow", False
        return f"HTTP {status}", status >= 500 or status in _RETRIED

    def _client(self) -> aiohttp.ClientSession:
        import aiohttp

        if self._session is None:
            connector = aiohttp.TCPConnector(resolver=GuardedResolver(self.targets))
            self._session = aiohttp.ClientSession(connector=connector, trust_env=False)
        return self._session

    def _body(self, event: Event) -> bytes:
        body = json.dumps(to_json(to_stream_response(event)), ensure_ascii=False).encode()
        if len(body) <= self._settings.max_body_bytes:
            return body
        return json.dumps(to_json(to_stream_response(_slim(event, len(body))))).encode()


def _failed(error: str, state: Delivery) -> None:
    state.failed_attempts += 1
    state.last_error = error


def _copy(event: Event) -> Event:
    """The event as it is now (the writer's task object goes on changing)."""
    copied = type(event)()
    copied.CopyFrom(event)  # type: ignore[arg-type]
    return copied


def _slim(event: Event, size: int) -> Event:
    """`event` without the content that made it larger than a notification may be."""
    slim = _copy(event)
    note = f"({size} bytes: too large for a notification; GetTask has it)"
    if isinstance(slim, Task):
        slim.ClearField("history")
        slim.ClearField("artifacts")
        if slim.status.HasField("message"):
            slim.status.ClearField("message")
    elif isinstance(slim, TaskArtifactUpdateEvent):
        del slim.artifact.parts[:]
        slim.artifact.parts.append(new_text_part(note))
    elif slim.HasField("status") and slim.status.HasField("message"):  # type: ignore[union-attr]
        del slim.status.message.parts[:]  # type: ignore[union-attr]
        slim.status.message.parts.append(new_text_part(note))  # type: ignore[union-attr]
    return slim


def _describe(exc: BaseException) -> str:
    """What went wrong: aiohttp names the host and port, never the URL's path or query
    (which may hold a secret)."""
    return str(exc) or type(exc).__name__
