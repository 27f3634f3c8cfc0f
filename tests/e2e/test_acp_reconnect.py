"""Sessions outlive ACP connections: `raven acp --listen` driven over raw WebSockets, as
editors that drop and reconnect, or share one session, drive it. Every update carries its
cursor in the session's log (`_meta.raven.cursor`); `session/resume` with
`_meta.raven.after` goes on right after it."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from pathlib import Path
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from tests.conftest import write_config
from tests.e2e.acp_harness import WRITE_IT
from tests.e2e.test_acp_listen import listening, scripted
from tests.processes import ended, pid_from

DEADLINE_S = 30.0


class Wire:
    """One editor's connection: JSON-RPC frames over a WebSocket, kept as they come."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.frames: list[dict[str, Any]] = []
        """What the server sent, but the answers to this editor's requests."""
        self._taken = 0
        self._ids = itertools.count(1)

    @classmethod
    async def open(cls, url: str, auth: dict[str, str]) -> Wire:
        socket = await connect("ws" + url.removeprefix("http"), additional_headers=auth)
        wire = cls(socket)
        await wire.call("initialize", {"protocolVersion": 1})
        return wire

    async def send(self, message: dict[str, Any]) -> None:
        await self.socket.send(json.dumps({"jsonrpc": "2.0", **message}))

    async def _read(self) -> dict[str, Any]:
        async with asyncio.timeout(DEADLINE_S):
            frame: dict[str, Any] = json.loads(await self.socket.recv())
        return frame

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """A request's answer (its `result` or `error`); what comes before it is kept."""
        request_id = next(self._ids)
        await self.send({"id": request_id, "method": method, "params": params})
        while True:
            frame = await self._read()
            if frame.get("id") == request_id and "method" not in frame:
                return frame
            self.frames.append(frame)

    async def until(self, wanted: Any) -> dict[str, Any]:
        """The first frame sent so far, or to come, for which `wanted` holds."""
        for frame in self.frames:
            if wanted(frame):
                return frame
        while True:
            frame = await self._read()
            self.frames.append(frame)
            if wanted(frame):
                return frame

    async def next_update(self, or_asked: bool = False) -> dict[str, Any]:
        """The next update of a turn (or, `or_asked`, permission request), in the order
        sent, each once."""
        while True:
            while self._taken < len(self.frames):
                frame = self.frames[self._taken]
                self._taken += 1
                if logged(frame) or (or_asked and asks(frame)):
                    return frame
            self.frames.append(await self._read())

    async def new_session(self, cwd: Path) -> str:
        answer = await self.call("session/new", {"cwd": str(cwd), "mcpServers": []})
        return str(answer["result"]["sessionId"])

    async def resume(self, session_id: str, cwd: Path, after: str | None = None) -> None:
        """`session/resume`, after the update whose cursor is `after` (None: from now)."""
        params: dict[str, Any] = {"sessionId": session_id, "cwd": str(cwd)}
        if after is not None:
            params["_meta"] = {"raven": {"after": after}}
        answer = await self.call("session/resume", params)
        assert "result" in answer, answer

    async def prompt(self, session_id: str, text: str) -> None:
        """Send a prompt as request 99, whose answer comes when its turn ends."""
        params = {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}
        await self.send({"id": 99, "method": "session/prompt", "params": params})

    def updates(self) -> list[dict[str, Any]]:
        """The turns' updates it was sent, each with its cursor in the log."""
        return [f for f in self.frames if logged(f)]

    async def drop(self) -> None:
        """Gone without a word, as a dropped network is."""
        self.socket.transport.abort()
        await self.socket.wait_closed()


def asks(frame: dict[str, Any]) -> bool:
    return frame.get("method") == "session/request_permission"


def logged(frame: dict[str, Any]) -> bool:
    """A `session/update` of a turn, numbered by the session's log."""
    return frame.get("method") == "session/update" and "_meta" in frame["params"]


def says(text: str) -> Any:
    """Whether a frame is the agent saying `text`."""

    def check(frame: dict[str, Any]) -> bool:
        update = frame.get("params", {}).get("update", {}) if logged(frame) else {}
        return update.get("sessionUpdate") == "agent_message_chunk" and (
            update["content"]["text"] == text
        )

    return check


def cursor(frame: dict[str, Any]) -> str:
    return str(frame["params"]["_meta"]["raven"]["cursor"])


def seq(frame: dict[str, Any]) -> int:
    return int(cursor(frame).rsplit(".", 1)[1])


def allow(request: dict[str, Any]) -> dict[str, Any]:
    chosen = {"outcome": "selected", "optionId": "allow_once"}
    return {"id": request["id"], "result": {"outcome": chosen}}


async def test_an_editor_that_drops_mid_turn_resumes_it_and_is_asked_again(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    scripted(home, [{"toolCalls": [WRITE_IT]}, {"text": "Written."}])
    async with listening(env) as server:
        first = await Wire.open(server.url, server.auth)
        sid = await first.new_session(tmp_path)
        await first.prompt(sid, "write it")
        await first.until(asks)  # the turn waits for this editor's answer…
        seen = first.updates()
        last = cursor(seen[-1])
        await first.drop()  # …and the editor is gone

        again = await Wire.open(server.url, server.auth)
        await again.resume(sid, tmp_path, after=last)
        asked = await again.until(asks)  # the turn still waits: asked again, here
        assert "remote.txt" in json.dumps(asked["params"]["toolCall"])
        await again.send(allow(asked))
        await again.until(says("Written."))
        assert (tmp_path / "remote.txt").read_text() == "from afar"
        # What came after its cursor, once each and in order: nothing it had already.
        numbers = [seq(f) for f in again.updates()]
        assert numbers == sorted(set(numbers)) and numbers[0] > seq(seen[-1])
        await again.drop()


async def test_two_editors_on_one_session_see_one_turn_and_the_first_answer_wins(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    scripted(home, [{"toolCalls": [WRITE_IT]}, {"text": "Written."}])
    async with listening(env) as server:
        mine = await Wire.open(server.url, server.auth)
        sid = await mine.new_session(tmp_path)
        theirs = await Wire.open(server.url, server.auth)
        await theirs.resume(sid, tmp_path)
        await mine.prompt(sid, "write it")
        asked_me, asked_them = await mine.until(asks), await theirs.until(asks)
        # One turn at a time: the other editor's prompt is refused while it runs.
        words = [{"type": "text", "text": "write it"}]
        refused = await theirs.call("session/prompt", {"sessionId": sid, "prompt": words})
        assert refused["error"]["code"] == -32600, refused
        assert "already running" in refused["error"]["message"]
        await theirs.send(allow(asked_them))  # they answer first
        withdrawn = await mine.until(lambda f: f.get("method") == "$/cancel_request")
        assert withdrawn["params"]["requestId"] == asked_me["id"]  # mine is told it is over
        done = await mine.until(lambda f: f.get("id") == 99)
        assert done["result"]["stopReason"] == "end_turn"
        last = cursor(mine.updates()[-1])
        await theirs.until(lambda f: logged(f) and cursor(f) == last)
        # The same updates, in the same order, on both connections.
        assert [(cursor(f), f["params"]["update"]) for f in mine.updates()] == [
            (cursor(f), f["params"]["update"]) for f in theirs.updates()
        ]
        assert (tmp_path / "remote.txt").read_text() == "from afar"
        await mine.drop()
        await theirs.drop()


async def test_twenty_drops_at_random_points_lose_and_repeat_nothing(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    before = " ".join(f"a{n}" for n in range(300))
    after = " ".join(f"b{n}" for n in range(300)) + " END."
    steps = [
        {"text": before, "wordDelayMs": 4, "toolCalls": [WRITE_IT]},
        {"text": after, "wordDelayMs": 4},
    ]
    scripted(home, steps)
    shuffle = random.Random(7)
    async with listening(env) as server:
        observer = await Wire.open(server.url, server.auth)
        sid = await observer.new_session(tmp_path)
        dropper = await Wire.open(server.url, server.auth)
        await dropper.resume(sid, tmp_path)
        await observer.prompt(sid, "talk")
        kept: list[dict[str, Any]] = []
        asked = 0

        async def read(count: int) -> bool:
            """Up to `count` updates; True when the permission was asked the first time
            (the editor then drops with it pending), which is answered the next."""
            nonlocal asked
            for _ in range(count):
                frame = await dropper.next_update(or_asked=True)
                if not asks(frame):
                    kept.append(frame)
                    continue
                asked += 1
                if asked == 1:
                    return True
                await dropper.send(allow(frame))
            return False

        async def reconnect() -> Wire:
            await dropper.drop()
            again = await Wire.open(server.url, server.auth)
            await again.resume(sid, tmp_path, after=cursor(kept[-1]))
            return again

        for _ in range(20):
            await read(shuffle.randint(1, 25))
            dropper = await reconnect()
        while asked < 2:  # the turn waits for the permission: dropped on once, then answered
            if await read(1):
                dropper = await reconnect()
        await observer.until(lambda f: f.get("id") == 99)  # the turn is over
        whole = observer.updates()  # every update of the turn, on one connection
        while cursor(kept[-1]) != cursor(whole[-1]):
            await read(1)
        assert [cursor(f) for f in kept] == [cursor(f) for f in whole]  # 0 lost, 0 twice
        chunks = [f["params"]["update"] for f in kept]
        text = "".join(
            u["content"]["text"] for u in chunks if u["sessionUpdate"] == "agent_message_chunk"
        )
        assert text == before + "\n\n" + after  # the second step's words a paragraph on
        assert asked == 2 and (tmp_path / "remote.txt").read_text() == "from afar"
        await dropper.drop()
        await observer.drop()


async def test_a_turn_no_editor_follows_is_cancelled_once_its_bound_passed(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    pidfile = tmp_path / "pid"
    sleep = {"name": "run_command", "arguments": {"command": f"echo $$ > {pidfile}; sleep 60"}}
    scripted(home, [{"toolCalls": [sleep]}, {"text": "never"}])
    config = json.loads((home / "config.json").read_text())
    modes = [{"id": "auto", "name": "Auto", "approvals": "auto"}]
    limits = {"detachedTurnS": 0.5}
    write_config(home, {**config, "modes": modes, "defaultMode": "auto", "limits": limits})
    async with listening(env) as server:
        editor = await Wire.open(server.url, server.auth)
        await editor.prompt(await editor.new_session(tmp_path), "sleep")
        pid = await pid_from(pidfile)
        await editor.drop()  # nobody follows the session any more: after 0.5 s, stopped
        assert await ended([pid], DEADLINE_S)


async def test_a_load_after_a_cursor_replays_only_what_followed_and_a_stale_one_is_refused(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    scripted(home, [{"text": "First."}, {"text": "Second."}])
    async with listening(env) as server:
        editor = await Wire.open(server.url, server.auth)
        sid = await editor.new_session(tmp_path)
        await editor.prompt(sid, "one")
        await editor.until(lambda f: f.get("id") == 99)
        mark = cursor(editor.updates()[-1])
        editor.frames.clear()
        await editor.send({"id": 98, "method": "session/prompt", "params": {
            "sessionId": sid, "prompt": [{"type": "text", "text": "two"}]}})  # fmt: skip
        await editor.until(lambda f: f.get("id") == 98)
        await editor.drop()

        later = await Wire.open(server.url, server.auth)
        params = {"sessionId": sid, "cwd": str(tmp_path), "_meta": {"raven": {"after": mark}}}
        assert "result" in await later.call("session/load", params)
        texts = [
            f["params"]["update"]["content"]["text"]
            for f in later.frames
            if f.get("method") == "session/update"
            and f["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
        ]
        assert texts == ["Second."]  # the turn it missed, not the whole transcript
        stale = {**params, "_meta": {"raven": {"after": "0000.1"}}}
        refused = await later.call("session/resume", stale)
        assert (
            refused["error"]["code"] == -32602 and "Load the session" in refused["error"]["message"]
        )
        await later.drop()
