"""`raven demo`: every face working together, offline, in a throwaway home.

Starts real processes the way a user would (an A2A peer, `raven run` turns that call it
and a `raven acp` sub-agent, a gateway driven over Raven RPC, the session commands),
shows what crossed each boundary, and stops everything it started on success, failure or
Ctrl-C. Never reads or writes the user's own config, sessions or logs.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from raven import lifeline

DEADLINE_S = 60.0
STOP_S = 5.0
MAX_FRAMES_SHOWN = 30
RAVEN = [sys.executable, "-m", "raven"]


class DemoFailed(Exception):
    """A step did not do what it shows; the message says what happened instead."""


@dataclass
class Step:
    name: str
    boundary: str
    crossed: str = ""
    result: str = ""
    seconds: float = 0.0
    ok: bool = False


def run_demo(web: bool, keep: bool) -> int:
    """Run the demo; the exit code (0 when every step passed, 130 when interrupted)."""
    from rich.console import Console

    console = Console(highlight=False)
    demo = Demo(console, web)
    code = 0
    signal.signal(signal.SIGINT, demo.interrupts.arrived)
    signal.signal(signal.SIGTERM, demo.interrupts.arrived)
    try:
        demo.run()
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: stopping what the demo started[/]")
        code = 130
    except DemoFailed as exc:
        console.print(f"[red]demo failed:[/] {exc}")
        code = 1
    finally:
        demo.close(keep)
    if code == 0:
        demo.summary()
    return code


class Interrupts:
    """Ctrl-C and SIGTERM as KeyboardInterrupt, held back while a child is started and
    recorded (else one arriving in between leaves a child nobody stops)."""

    def __init__(self) -> None:
        self._holding = False
        self._pending = False

    def arrived(self, signum: int, frame: Any) -> None:
        if self._holding:
            self._pending = True
        else:
            raise KeyboardInterrupt

    @contextmanager
    def held(self) -> Iterator[None]:
        self._holding = True
        try:
            yield
        finally:
            self._holding = False
            if self._pending:
                self._pending = False
                raise KeyboardInterrupt


class Demo:
    def __init__(self, console: Any, web: bool) -> None:
        self.console = console
        self.web = web
        self.root = Path(tempfile.mkdtemp(prefix="raven-demo-"))
        self.local = self.root / "local"
        self.peer = self.root / "peer"
        self.work = self.root / "work"
        self.taps = self.root / "acp-frames.log"
        self.procs: list[subprocess.Popen[str]] = []
        self.steps: list[Step] = []
        self.peer_token = secrets.token_urlsafe(24)
        self.card_url = self.rpc_url = self.gateway_url = self.rpc_session = ""
        self.stderr: dict[int, Path] = {}
        self.interrupts = Interrupts()

    # -- the steps -----------------------------------------------------------------------

    def run(self) -> None:
        self.console.rule("[bold]Raven demo[/]: every face, offline, in " + str(self.root))
        self.step("home", "—", self.make_homes)
        self.step("A2A server", "HTTP A2A", self.serve_a2a)
        self.step("a2a_send", "HTTP A2A", self.ask_the_peer)
        self.step("A2A question", "HTTP A2A", self.answer_the_peer)
        self.step("sub-agent", "stdio ACP", self.delegate)
        self.step("gateway", "WebSocket RPC", self.drive_the_gateway)
        self.step("sessions", "SQLite", self.list_resume_replay)
        if self.web:
            self.open_web()

    def make_homes(self, step: Step) -> None:
        for path in (self.local, self.peer, self.work):
            path.mkdir(mode=0o700)
        (self.work / "RELEASE.md").write_text(
            "# 1.2\n\n- Fix: the login bug.\n- Start-up takes half the time.\n"
        )
        _write_json(
            self.peer / "peer.json",
            [
                _call("read_file", path="RELEASE.md"),
                {"text": "Release 1.2 fixes the login bug and halves start-up time."},
                {
                    "toolCalls": [
                        {
                            "name": "ask_user",
                            "arguments": {
                                "question": "Deploy release 1.2 to which environment?",
                                "choices": ["staging", "production"],
                            },
                        }
                    ]
                },
                {"text": "Deployed release 1.2 where you said."},
            ],
        )
        _write_config(
            self.peer,
            {
                "models": [{"id": "peer", "provider": "scripted", "script": "peer.json"}],
                "defaultModel": "peer",
                "a2a": {"server": {"token": self.peer_token, "cwd": str(self.work)}},
            },
        )
        _write_json(
            self.local / "sub.json",
            [
                {
                    "toolCalls": [
                        {
                            "name": "write_file",
                            "arguments": {
                                "path": "NOTES.md",
                                "content": "# Release 1.2\n\n- fixes the login bug\n"
                                "- halves start-up time\n",
                            },
                        }
                    ]
                },
                {"text": "Wrote NOTES.md."},
            ],
        )
        step.crossed = "nothing yet: two homes (this machine and a peer), scripted models"
        step.result = f"token minted for the peer ({_mask(self.peer_token)})"
        self.show(
            step,
            f"local home  {self.local}\npeer home   {self.peer}\nwork dir    {self.work}\n"
            f"peer token  {_mask(self.peer_token)} (0600 config, never printed whole)",
        )

    def serve_a2a(self, step: Step) -> None:
        import httpx

        proc = self.spawn([*RAVEN, "a2a", "serve", "--port", "0"], self.peer)
        lines = self.read_lines(proc, ("card:", "rpc:"))
        self.card_url, self.rpc_url = lines["card:"], lines["rpc:"]
        origin = self.card_url.split("/.well-known")[0]
        self.write_local_config(origin)
        card = httpx.get(self.card_url, timeout=10).json()
        skills = ", ".join(s.get("name", "?") for s in card.get("skills", []))
        step.crossed = "GET /.well-known/agent-card.json (public, no token)"
        step.result = f"card of {card.get('name')!r} served on {origin}"
        self.show(
            step,
            f"raven a2a serve (pid {proc.pid}) on {origin}\n"
            f"> GET {self.card_url}\n< 200 {card.get('name')}: {card.get('description', '')}\n"
            f"  skills: {skills}\n  security: {', '.join(card.get('securitySchemes', {}))}",
        )

    def ask_the_peer(self, step: Step) -> None:
        events = self.turn("Ask the peer agent what changed in release 1.2.")
        call = _first(events, "ToolCallStarted")
        done = _first(events, "ToolCallUpdated", status="completed")
        answer = "".join(e["text"] for e in events if e["type"] == "AgentText")
        tasks = self.a2a_call("ListTasks", {"historyLength": 10})["tasks"]
        if not tasks or tasks[0]["status"]["state"] != "TASK_STATE_COMPLETED":
            raise DemoFailed(f"the peer's task did not complete: {tasks}")
        task = tasks[0]
        said = [_text(m) for m in task.get("history", [])]
        step.crossed = "SendMessage (bearer from a2a.peers) → task; ListTasks"
        worked = [s for s in said if s.startswith(("→", "✓"))]
        if not worked:
            raise DemoFailed(f"the peer's task shows no work: {said}")
        step.result = f"peer task {task['id'][:8]}… working ({len(worked)} updates) → completed"
        history = "".join(f"    {s}\n" for s in said if s)
        self.show(
            step,
            f"raven run: the model calls {call['tool']}({call['rawInput']['message']!r})\n"
            f"> POST {self.rpc_url}  SendMessage  Authorization: Bearer "
            f"{_mask(self.peer_token)}\n"
            f"< task {task['id']}: working → {task['status']['state']}\n"
            f"  the peer's history (ListTasks):\n{history}"
            f"  tool result: {_one_line(done.get('content') or '')}\n"
            f"answer: {answer}",
        )

    def answer_the_peer(self, step: Step) -> None:
        first = self.raven_json(["a2a", "send", "--json", self.card_url, "Deploy release 1.2."])
        first = _task_of(first)
        status = first["status"]
        if status["state"] != "TASK_STATE_INPUT_REQUIRED":
            raise DemoFailed(f"the peer did not ask: {status}")
        question = _text(status.get("message", {}))
        reply = self.raven_json(
            [
                "a2a",
                "send",
                "--json",
                "--task-id",
                first["id"],
                "--context-id",
                first["contextId"],
                self.card_url,
                "staging",
            ]
        )
        reply = _task_of(reply)
        state = reply["status"]["state"]
        if state != "TASK_STATE_COMPLETED":
            raise DemoFailed(f"the answered task ended {state}")
        step.crossed = "SendMessage ×2 (question, then the answer with taskId)"
        step.result = "input-required → completed"
        self.show(
            step,
            f"> SendMessage 'Deploy release 1.2.'  Authorization: Bearer "
            f"{_mask(self.peer_token)}\n"
            f"< task {first['id'][:8]}… {status['state']}: {question}\n"
            f"> SendMessage 'staging' (taskId {first['id'][:8]}…)\n"
            f"< {state}: {_text(reply['status'].get('message', {}))}",
        )

    def delegate(self, step: Step) -> None:
        events = self.turn("Have the helper write NOTES.md about release 1.2.", "lead")
        progress = [
            e.get("content") or ""
            for e in events
            if e["type"] == "ToolCallUpdated" and e["status"] == "in_progress"
        ]
        notes = self.work / "NOTES.md"
        if not notes.exists():
            raise DemoFailed("the sub-agent's file was not written")
        frames = list(_acp_frames(self.taps))
        chosen = next((f for f in frames if "outcome allow_always" in f and "→" in f), "")
        if not chosen:
            raise DemoFailed("the sub-agent's permission request was not answered allow_always")
        step.crossed = f"{len(frames)} ACP frames over the sub-agent's stdio"
        step.result = "permission auto-selected allow_always; NOTES.md written"
        self.show(
            step,
            "raven run → delegate(helper) → raven acp (sub-agent, its own process group)\n"
            + "\n".join(frames[:MAX_FRAMES_SHOWN])
            + ("\n…" if len(frames) > MAX_FRAMES_SHOWN else "")
            + "\nprogress relayed: "
            + "; ".join(p for p in progress if p)[:300]
            + f"\n{notes}:\n"
            + notes.read_text(),
        )

    def drive_the_gateway(self, step: Step) -> None:
        import asyncio

        port = _free_port()
        proc = self.spawn([*RAVEN, "gateway", "--port", str(port)], self.local)
        self.gateway_url = self.read_lines(proc, ("gateway:", "login:"))["gateway:"].split()[0]
        token = (self.local / "gateway.token").read_text().strip()
        notes, session_id = asyncio.run(_rpc_turn(self.gateway_url, token, self.work))
        self.rpc_session = session_id
        texts = [s for s, n in notes if _event_type(n) == "AgentText"]
        lines: list[tuple[float, str]] = []
        for seconds, note in notes:
            kind = _event_type(note)
            if kind == "AgentText" and seconds not in (texts[0], texts[-1]):
                continue  # the streamed text: its first and last chunks
            lines.append((seconds, f"{note[0]} {kind}".strip()))
        ended = next(s for s, n in notes if _event_type(n) == "TurnEnded")
        first, chunks = texts[0], len(texts)
        step.crossed = f"{len(notes)} notifications over one WebSocket"
        step.result = (
            f"first text after {first * 1000:.0f} ms, turn ended after {ended * 1000:.0f} ms"
        )
        self.show(
            step,
            f"raven gateway (pid {proc.pid}) at {self.gateway_url}; token "
            f"{_mask(token)}\n"
            f"> system.hello  > session.create (session {session_id[:12]}…)  > turn.send\n"
            + "\n".join(f"{s * 1000:7.1f} ms  < {what}" for s, what in lines)
            + f"\n({chunks} AgentText chunks streamed)",
        )

    def list_resume_replay(self, step: Step) -> None:
        listed = self.raven_text(["sessions", "list"])
        if self.rpc_session not in listed:
            raise DemoFailed("the gateway's session is not listed")
        resumed = self.raven_text(
            ["run", "--model", "echo", "--session", self.rpc_session, "and once more"]
        )
        replay = self.raven_text(["sessions", "show", self.rpc_session])
        if "Hello over Raven RPC" not in replay or "and once more" not in replay:
            raise DemoFailed("the replay lacks a turn")
        step.crossed = "raven.db (SQLite, WAL) shared by every face"
        step.result = "listed, resumed from the CLI, replayed"
        self.show(
            step,
            "$ raven sessions list\n"
            + "\n".join(listed.splitlines()[:6])
            + f"\n$ raven run --session {self.rpc_session[:12]}… 'and once more'\n"
            + resumed.strip()
            + f"\n$ raven sessions show {self.rpc_session[:12]}…\n"
            + "\n".join(replay.splitlines()[:12]),
        )

    def open_web(self) -> None:
        # `raven web` beside a running gateway: a fresh one-time link, opened if it can be.
        self.console.print(self.raven_text(["web"]).strip(), markup=False, highlight=False)
        self.console.print("Ctrl-C stops the demo")
        signal.pause() if hasattr(signal, "pause") else time.sleep(10**9)

    # -- helpers ----------------------------------------------------------------------------

    def step(self, name: str, boundary: str, action: Callable[[Step], None]) -> None:
        step = Step(name, boundary)
        self.steps.append(step)
        started = time.perf_counter()
        with self.console.status(f"{name}…"):
            action(step)
        step.seconds = time.perf_counter() - started
        step.ok = True

    def show(self, step: Step, body: str) -> None:
        from rich.panel import Panel
        from rich.text import Text

        title = f"[bold]{len(self.steps)}. {step.name}[/] · {step.boundary}"
        self.console.print(Panel(Text(body), title=title, title_align="left", expand=True))

    def write_local_config(self, peer_origin: str) -> None:
        tap = [sys.executable, "-m", "raven.demo.frametap", str(self.taps), "--"]
        _write_config(
            self.local,
            {
                "models": [
                    {"id": "main", "provider": "scripted", "script": "main.json"},
                    {"id": "lead", "provider": "scripted", "script": "lead.json"},
                    {"id": "writer", "provider": "scripted", "script": "writer.json"},
                    {"id": "sub", "provider": "scripted", "script": "sub.json"},
                ],
                "defaultModel": "main",
                "modes": [
                    {"id": "auto", "name": "Auto", "approvals": "auto"},
                    {"id": "ask", "name": "Ask"},
                ],
                "defaultMode": "auto",
                "a2a": {"peers": [{"origin": peer_origin, "credential": self.peer_token}]},
                "agents": [
                    {
                        "name": "helper",
                        "description": "Raven itself, over ACP",
                        "command": tap[0],
                        "args": [*tap[1:], *RAVEN, "acp", "--model", "sub", "--mode", "ask"],
                        "permissions": "auto",
                    }
                ],
            },
        )
        _write_json(
            self.local / "main.json",
            [
                _call("a2a_send", card_url=self.card_url, message="What changed in release 1.2?"),
                {"text": "The peer says release 1.2 fixes the login bug and halves start-up."},
            ],
        )
        _write_json(
            self.local / "writer.json",
            [
                {
                    "text": "These words reach the browser one by one, as the model writes them.",
                    "wordDelayMs": 25,
                }
            ],
        )
        _write_json(
            self.local / "lead.json",
            [
                _call("delegate", agent="helper", task="Write NOTES.md about release 1.2."),
                {"text": "The helper wrote NOTES.md."},
            ],
        )

    def env(self, home: Path) -> dict[str, str]:
        keep = {
            k: v
            for k, v in os.environ.items()
            if not k.endswith("_API_KEY") and k not in ("RAVEN_CONFIG", "RAVEN_SUBAGENT")
        }
        width = str(max(60, self.console.width - 4))  # what they print goes inside a panel
        return {**keep, "RAVEN_HOME": str(home), "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": width}

    def spawn(self, args: list[str], home: Path) -> subprocess.Popen[str]:
        """A long-running child in its own session (Ctrl-C reaches the demo, which stops it)."""
        log = self.root / f"stderr-{len(self.stderr)}.log"
        with log.open("w") as errors, self.interrupts.held():
            proc = subprocess.Popen(
                args,
                env={**self.env(home), **lifeline.env()},
                cwd=self.work,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=errors,
                text=True,
                start_new_session=True,
            )
            self.stderr[proc.pid] = log
            self.procs.append(proc)
        return proc

    def read_lines(self, proc: subprocess.Popen[str], keys: tuple[str, ...]) -> dict[str, str]:
        assert proc.stdout is not None
        name = " ".join(str(a) for a in proc.args[3:5])  # type: ignore[index]
        found: dict[str, str] = {}
        deadline = time.monotonic() + DEADLINE_S
        while len(found) < len(keys) and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise DemoFailed(f"raven {name} exited: {self.stderr_of(proc)}")
            key, _, value = line.strip().partition(" ")
            if key in keys:
                found[key] = value.strip()
        if len(found) < len(keys):
            raise DemoFailed(f"raven {name} did not start within {DEADLINE_S:.0f} s")
        return found

    def stderr_of(self, proc: subprocess.Popen[str]) -> str:
        path = self.stderr[proc.pid]
        return path.read_text()[-2000:] if path.exists() else ""

    def raven(self, args: list[str]) -> tuple[int, str]:
        """`raven ARGS` in the local home, to the end; stopped with the demo if interrupted."""
        proc = self.spawn([*RAVEN, *args], self.local)
        try:
            out, _ = proc.communicate(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            raise DemoFailed(f"raven {args[0]} took longer than {DEADLINE_S:.0f} s") from None
        self.procs.remove(proc)
        if proc.returncode not in (0, 4):
            raise DemoFailed(f"raven {' '.join(args[:2])} exited {proc.returncode}: {out[-500:]}")
        return proc.returncode, out

    def raven_text(self, args: list[str]) -> str:
        return self.raven(args)[1]

    def raven_json(self, args: list[str]) -> dict[str, Any]:
        return json.loads(self.raven(args)[1])  # type: ignore[no-any-return]

    def turn(self, prompt: str, model: str = "main") -> list[dict[str, Any]]:
        """One `raven run` turn (each is its own process, so each scripted model its own)."""
        args = ["run", "--model", model, "--output", "jsonl", "--cwd", str(self.work), prompt]
        out = self.raven_text(args)
        events = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        ended = [e for e in events if e["type"] == "TurnEnded"]
        if not ended or ended[-1]["stopReason"] != "end_turn":
            raise DemoFailed(f"the turn did not end well: {ended}")
        return events

    def a2a_call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        import httpx

        reply = httpx.post(
            self.rpc_url,
            json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
            headers={"Authorization": f"Bearer {self.peer_token}", "A2A-Version": "1.0"},
            timeout=10,
            follow_redirects=False,
        ).json()
        if "error" in reply:
            raise DemoFailed(f"{method}: {reply['error']}")
        return reply["result"]  # type: ignore[no-any-return]

    def close(self, keep: bool) -> None:
        """Stop every process started (SIGTERM, then SIGKILL to its group), then the home."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(STOP_S)
            except subprocess.TimeoutExpired:
                with _quiet():
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        if keep:
            self.console.print(f"kept the demo's home: {self.root}")
        else:
            shutil.rmtree(self.root, ignore_errors=True)

    def summary(self) -> None:
        from rich.table import Table

        table = Table(title="What crossed each boundary", title_justify="left")
        for column in ("step", "boundary", "what crossed", "result", "time"):
            table.add_column(column, justify="right" if column == "time" else "left")
        for step in self.steps:
            table.add_row(
                step.name, step.boundary, step.crossed, step.result, f"{step.seconds:.2f} s"
            )
        self.console.print(table)
        self.console.print(
            f"[green]all {len(self.steps)} steps passed[/]; every process stopped"
            + ("" if self.root.exists() else ", the temporary home removed")
        )


async def _rpc_turn(url: str, token: str, cwd: Path) -> tuple[list[tuple[float, Note]], str]:
    """As a browser would: create a session over Raven RPC and stream one turn; each
    notification with its arrival in seconds after `turn.send`."""
    import asyncio

    from raven.rpc import contract as c
    from raven.rpc.client import RpcClient

    notes: list[tuple[float, Note]] = []
    started = time.perf_counter()
    ended = asyncio.Event()

    def on_note(method: str, note: c.Wire) -> None:
        notes.append((time.perf_counter() - started, (method, note)))
        if _event_type((method, note)) == "TurnEnded":
            ended.set()

    async with RpcClient.connect(url, token, on_note) as rpc:
        await rpc.call("system.hello")
        session = await rpc.call("session.create", c.SessionCreate(cwd=str(cwd), model="writer"))
        notes.clear()
        started = time.perf_counter()
        text = "Hello over Raven RPC: stream me an answer"
        await rpc.call("turn.send", c.TurnSend(session_id=session.session_id, text=text))
        async with asyncio.timeout(DEADLINE_S):
            await ended.wait()
        return notes, session.session_id


Note = tuple[str, Any]
"""A Raven RPC notification: its method and its params (parsed)."""


def _event_type(note: Note) -> str:
    event = getattr(note[1], "event", None)
    return str(event["type"]) if isinstance(event, dict) else ""


def _acp_frames(log: Path) -> Iterator[str]:
    """The tap's log as one line per frame: direction, method or result, what matters."""
    if not log.exists():
        return
    methods: dict[Any, str] = {}
    for raw in log.read_text(errors="replace").splitlines():
        mark, _, rest = raw.partition(" ")
        stamp, _, body = rest.partition(" ")
        try:
            frame = json.loads(body)
        except ValueError:
            continue
        arrow = f"{float(stamp):7.1f} ms  raven {'→' if mark == '>' else '←'} sub-agent"
        if "method" in frame:
            if "id" in frame:
                methods[frame["id"]] = frame["method"]
            yield f"{arrow}  {frame['method']}{_detail(frame)}"
        else:
            what = methods.get(frame.get("id"), "?")
            result = frame.get("result") or {}
            if "error" in frame:
                detail = f"error {frame['error'].get('message')}"
            elif "outcome" in result:
                detail = f"outcome {result['outcome'].get('optionId')}"
            elif "stopReason" in result:
                detail = f"stopReason {result['stopReason']}"
            else:
                detail = "ok"
            yield f"{arrow}  result of {what}: {detail}"


def _detail(frame: dict[str, Any]) -> str:
    params = frame.get("params") or {}
    update = params.get("update") or {}
    if update:
        kind = update.get("sessionUpdate", "")
        extra = update.get("title") or update.get("status") or ""
        return f" ({kind}{': ' + extra if extra else ''})"
    if "options" in params:
        return f" (options {', '.join(o.get('kind', '') for o in params['options'])})"
    return ""


def _first(events: list[dict[str, Any]], kind: str, **match: Any) -> dict[str, Any]:
    for event in events:
        if event["type"] == kind and all(event.get(k) == v for k, v in match.items()):
            return event
    raise DemoFailed(f"the turn had no {kind} {match or ''}")


def _task_of(reply: dict[str, Any]) -> dict[str, Any]:
    """The task in a SendMessage reply (the JSON-RPC response `raven a2a send --json` prints)."""
    task = reply.get("result", {}).get("task")
    if not isinstance(task, dict):
        raise DemoFailed(f"the peer answered without a task: {json.dumps(reply)[:300]}")
    return task


def _text(message: dict[str, Any]) -> str:
    return " ".join(p.get("text", "") for p in message.get("parts", []) if "text" in p)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= 160 else line[:157] + "…"


def _mask(secret: str) -> str:
    return secret[:4] + "…" + "*" * 6


def _call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"toolCalls": [{"name": name, "arguments": arguments}]}


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")


def _write_config(home: Path, data: dict[str, Any]) -> None:
    path = home / "config.json"
    path.touch(mode=0o600)
    _write_json(path, data)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def _quiet() -> Iterator[None]:
    try:
        yield
    except ProcessLookupError:
        pass
