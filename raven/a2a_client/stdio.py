"""A2A agents Raven starts itself and speaks to over their pipes: an `agents` entry with
`"protocol": "a2a-stdio"` (another `raven a2a stdio`, or any agent speaking that binding,
docs/a2a.md).

`StdioAgent` is one running agent: its handshake, then requests by id, answered in any
order. `StdioAgents` keeps one per (session, agent), started at the session's first call
and kept warm for its next ones, and stops it with its children (its process group)
when the session is released or Raven stops. Nothing listens and no credential is sent:
a pipe has no origin to scope one to. Every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from raven.a2a_client.send import PeerError, PeerReply, file_parts, message_json, read_reply
from raven.a2a_parts import safe_name
from raven.child_process import ChildProcess, why_not_started
from raven.config import A2AClientConfig, AgentSpec
from raven.jsonrpc.headed import FrameError, FrameTooLarge, frame, read_frame

log = logging.getLogger(__name__)

VARIANT = "stdio-json"
SESSION_ENV = "A2A_SESSION_ID"
EXIT_WAIT_S = 5.0
"""After its output ends, how long an agent's exit code is waited for, to say why."""


class StdioAgent:
    """One agent process and the requests waiting for its answers."""

    def __init__(self, spec: AgentSpec, child: ChildProcess, max_bytes: int) -> None:
        self.spec = spec
        self._child = child
        self._max_bytes = max_bytes
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._hello: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._gone: str | None = None
        self._writing = asyncio.Lock()
        self._reading = asyncio.create_task(self._read(), name=f"a2a-stdio:{spec.name}")

    @classmethod
    async def start(cls, spec: AgentSpec, cwd: Path, max_bytes: int) -> StdioAgent:
        """Start the agent and take its handshake within `readyTimeoutS`; raises
        `PeerError`."""
        env = {**spec.env, SESSION_ENV: str(uuid.uuid4())}
        try:
            child = await ChildProcess.spawn(spec.name, spec.command, spec.args, env, cwd)
        except OSError as exc:
            raise PeerError(why_not_started(spec.name, spec.command, cwd, exc)) from None
        agent = cls(spec, child, max_bytes)
        try:
            async with asyncio.timeout(spec.ready_timeout_s):
                hello = await agent._hello
            if VARIANT not in hello.get("supportedVariants", []):
                raise PeerError(f"A2A agent {spec.name} does not offer {VARIANT}")
            ack = {"sessionId": hello.get("sessionId"), "selectVariant": VARIANT}
            await agent._send({"type": "handshakeAck", **ack, "accept": True})
        except TimeoutError:
            await agent.stop()
            raise PeerError(
                f"A2A agent {spec.name} did not greet within {spec.ready_timeout_s:g}s"
            ) from None
        except BaseException:
            await agent.stop()
            raise
        return agent

    @property
    def alive(self) -> bool:
        return self._gone is None

    async def call(self, method: str, params: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        """The agent's answer (a JSON-RPC response) to one request; raises `PeerError`."""
        if self._gone is not None:
            raise PeerError(self._gone)
        request_id = next(self._ids)
        answer = self._waiting[request_id] = asyncio.get_running_loop().create_future()
        try:
            await self._send(
                {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
            )
            async with asyncio.timeout(timeout_s):
                return await answer
        except TimeoutError:
            raise PeerError(
                f"A2A agent {self.spec.name} did not answer within {timeout_s:g}s"
            ) from None
        finally:
            self._waiting.pop(request_id, None)

    async def stop(self) -> None:
        """Close its input (it finishes and exits), then stop its whole process group."""
        self._gone = self._gone or f"A2A agent {self.spec.name} was stopped"
        await self._child.stop()
        self._reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading

    async def _send(self, message: dict[str, Any]) -> None:
        stdin = self._child.proc.stdin
        if stdin is None or stdin.is_closing():
            raise PeerError(self._gone or self._child.describe_exit())
        async with self._writing:
            try:
                stdin.write(frame(message))
                await stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                raise PeerError(self._child.describe_exit()) from None

    async def _read(self) -> None:
        out = self._child.proc.stdout
        assert out is not None
        why: str | None = None
        try:
            while (body := await read_frame(out, self._max_bytes)) is not None:
                self._take(body)
            with contextlib.suppress(TimeoutError):  # its exit code, to say why it went
                async with asyncio.timeout(EXIT_WAIT_S):
                    await self._child.proc.wait()
        except FrameTooLarge as exc:
            why = f"A2A agent {self.spec.name} sent a frame too large to read ({exc})"
        except FrameError as exc:
            why = f"A2A agent {self.spec.name} broke its framing: {exc}"
        finally:
            if why is not None:
                log.warning("%s", why)
            self._gone = self._gone or why or self._child.describe_exit()
            self._fail(self._gone)

    def _take(self, body: bytes) -> None:
        try:
            message = json.loads(body)
        except ValueError:
            log.warning("A2A agent %s sent a frame that is not JSON", self.spec.name)
            return
        if not isinstance(message, dict):
            return
        if message.get("type") == "handshake" and not self._hello.done():
            self._hello.set_result(message)
            return
        waiting = self._waiting.get(message.get("id"))  # type: ignore[arg-type]
        if (
            waiting is not None
            and not waiting.done()
            and ("result" in message or "error" in message)
        ):
            waiting.set_result(message)

    def _fail(self, why: str) -> None:
        if not self._hello.done():
            self._hello.set_exception(PeerError(why))
            self._hello.exception()  # read: a start that gave up is not reported unread
        for waiting in self._waiting.values():
            if not waiting.done():
                waiting.set_exception(PeerError(why))


class StdioAgents:
    """The A2A agents over stdio of every session, by name, started at first use."""

    def __init__(self, specs: Sequence[AgentSpec], settings: A2AClientConfig) -> None:
        self.specs = {s.name: s for s in specs if s.enabled and s.over_a2a}
        self._settings = settings
        self._running: dict[tuple[str, str], StdioAgent] = {}
        self._starting: dict[tuple[str, str], asyncio.Lock] = {}

    async def send(
        self,
        session_id: str,
        name: str,
        cwd: Path,
        text: str,
        task_id: str | None = None,
        context_id: str | None = None,
        files: Sequence[Path] = (),
        inbox: Path | None = None,
    ) -> PeerReply:
        """Ask agent `name` (started in `cwd` for this session if it does not run: the
        agent's own `cwd`, resolved against the session's, or the session's); files in its
        reply are saved under `inbox/<name>/`. Raises `PeerError`."""
        settings = self._settings
        parts = await asyncio.to_thread(file_parts, files, settings.max_file_bytes)
        agent = await self._agent(session_id, name, cwd)
        params = {"message": message_json(text, task_id, context_id, parts)}
        reply = await agent.call("SendMessage", params, settings.timeout_s)
        where = inbox / safe_name(name, set()) if inbox is not None else None
        return await asyncio.to_thread(read_reply, reply, where, settings.max_file_bytes)

    async def release(self, session_id: str) -> None:
        """Stop the session's agents."""
        for key in [key for key in self._starting if key[0] == session_id]:
            del self._starting[key]
        mine = [key for key in self._running if key[0] == session_id]
        await asyncio.gather(*(self._running.pop(key).stop() for key in mine))

    async def aclose(self) -> None:
        running, self._running = list(self._running.values()), {}
        await asyncio.gather(*(agent.stop() for agent in running))

    async def _agent(self, session_id: str, name: str, cwd: Path) -> StdioAgent:
        spec = self.specs.get(name)
        if spec is None:
            known = ", ".join(self.specs) or "none"
            raise PeerError(f"no A2A agent {name!r} over stdio; configured: {known}")
        key = (session_id, name)
        async with self._starting.setdefault(key, asyncio.Lock()):
            agent = self._running.get(key)
            if agent is not None and agent.alive:
                return agent
            if agent is not None:
                await agent.stop()  # it exited: a new one for this call
            agent = await StdioAgent.start(spec, cwd, self._settings.max_response_bytes)
            self._running[key] = agent
            return agent
