"""`raven chat`: an interactive session in the terminal, on this process's engine.

Streams Markdown answers, shows tool calls live, asks approvals and questions
inline. Ctrl-C cancels the running turn, never the program; Ctrl-D or /quit exits.
On a terminal the prompt edits lines and keeps a history (`raven.terminal.prompt`);
`@path` attaches a file, `!command` runs one and offers its output with the next
message, and a message opened with three double quotes goes on until a line closes it. A new session
is stored with its first message, not before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.markup import escape

if TYPE_CHECKING:
    import asyncio

    from rich.console import Console

    from raven.engine import LiveSession, Runtime
    from raven.messages import Part
    from raven.terminal.prompt import ChatPrompt
    from raven.terminal.reader import LineReader
    from raven.terminal.view import TerminalView
    from raven.tools import ToolOutput

HELP = """commands:
  @PATH           (in a message) attach that file
  !COMMAND        run a shell command here; its output goes with your next message
  \"\"\"             start a message of several lines, ended by a line closing with \"\"\"
  /new            start a new session
  /sessions       list recent sessions
  /resume [ID]    continue a stored session (no ID: pick one)
  /model [ID]     list models, or switch model for the next turn
  /mode [ID]      list modes, or switch mode for the next turn
  /compact        summarise the older part of the conversation now (the model then sees
                  the summary and the last messages; the whole transcript is kept)
  /help           this help
  /quit           leave (Ctrl-D works too)
Ctrl-C cancels a running turn. On a terminal: Up/Down for history, Alt-Enter for a new
line, Tab completes /commands and @paths, Ctrl-L clears the screen."""

PROMPT = "› "
CONTINUED = "… "
"""The prompt of a message's further lines."""
PICK_LIMIT = 10
COMMANDS = ("/new", "/sessions", "/resume", "/model", "/mode", "/compact", "/help", "/quit")
FENCE = '"""'
_ATTACHED = re.compile(r"(?:^|\s)@(\S+)")


class Chat:
    def __init__(
        self,
        runtime: Runtime,
        cwd: Path,
        system: str | None = None,
        attached: Sequence[Part] = (),
        history: Path | None = None,
    ) -> None:
        """`history` is the prompt's history file: given, the chat reads the terminal
        through `ChatPrompt` (line editing); without, it reads lines (a pipe)."""
        import sys

        from rich.console import Console

        from raven.terminal.reader import LineReader
        from raven.terminal.view import TerminalView

        self.runtime = runtime
        self.cwd = cwd
        self.system = system
        self.attached = list(attached)
        """Parts (`--file`) that go with the first prompt."""
        self.out: Console = Console(file=sys.stdout, highlight=False)
        self.err: Console = Console(file=sys.stderr, highlight=False, soft_wrap=True)
        self.reader: LineReader = LineReader()
        self.prompt: ChatPrompt | None = None
        if history is not None:
            from raven.terminal.prompt import ChatPrompt

            self.prompt = ChatPrompt(history, cwd, COMMANDS, CONTINUED)
        self._shell: asyncio.Task[ToolOutput] | None = None
        self.view: TerminalView = TerminalView(self.out, self.err, markdown=True)
        self.session: LiveSession | None = None
        self._model: str | None = None
        self._mode: str | None = None

    async def run(self, session_id: str | None, model: str | None, mode: str | None) -> None:
        import asyncio
        import signal

        self._model, self._mode = model, mode
        if session_id:
            await self._resume(session_id)
        else:
            await self._new()
        self.err.print("[dim]/help for commands, Ctrl-D to leave[/]")
        if self.attached:
            self.err.print(
                f"[dim]{len(self.attached)} attached file(s) go with your first message[/]"
            )
        loop = asyncio.get_running_loop()

        def on_interrupt() -> None:
            if self._shell is not None:
                self._shell.cancel()
            elif self.session is None or not self.session.cancel_turn():
                self.err.print("\n[dim](Ctrl-D or /quit to leave)[/]")
                self.out.print(PROMPT, end="")

        loop.add_signal_handler(signal.SIGINT, on_interrupt)
        try:
            while True:
                text = await self._message()
                if text is None:
                    self.out.print()
                    return
                if not text:
                    continue
                if text.startswith("/"):
                    if not await self._command(text):
                        return
                elif text.startswith("!"):
                    await self._shell_command(text[1:].strip())
                else:
                    await self._turn(text)
        finally:
            loop.remove_signal_handler(signal.SIGINT)

    async def _message(self) -> str | None:
        """The next message, stripped; one opened with `FENCE` has the lines up to the
        one closing it (the fences stay out). None at the end of input."""
        first = await self._line(PROMPT)
        if first is None or not first.strip().startswith(FENCE):
            return None if first is None else first.strip()
        lines = [first.strip()[len(FENCE) :]]
        while not lines[-1].rstrip().endswith(FENCE):
            line = await self._line(CONTINUED)
            if line is None:
                break
            lines.append(line)
        lines[-1] = lines[-1].rstrip().removesuffix(FENCE)
        return "\n".join(lines).strip()

    async def _line(self, prompt: str) -> str | None:
        if self.prompt is None:
            self.out.print(prompt, end="")
            return await self.reader.readline()
        while True:
            try:
                return await self.prompt.read(prompt)
            except KeyboardInterrupt:
                self.err.print("[dim](Ctrl-D or /quit to leave)[/]")

    async def _shell_command(self, command: str) -> None:
        """Run `command` here as the person asked; show its output and keep it for the
        next message."""
        import asyncio

        from raven.attachments import fenced
        from raven.messages import TextPart
        from raven.tools.shell import run_shell

        if not command:
            self.err.print("[dim]!COMMAND runs COMMAND here[/]")
            return
        limits = self.runtime.config.limits
        self._shell = asyncio.ensure_future(
            run_shell(command, self.cwd, limits.command_timeout_s, limits.tool_output_chars)
        )
        try:
            output = await self._shell
        except asyncio.CancelledError:
            self.err.print("[yellow]cancelled[/]")
            return
        finally:
            self._shell = None
        self.out.print(output.text, markup=False, highlight=False)
        self.attached.append(TextPart(text=fenced(f"I ran `{command}`:", output.text)))
        self.err.print("[dim]its output goes with your next message[/]")

    async def _turn(self, text: str) -> None:
        from raven.engine import run_turn
        from raven.errors import RavenError
        from raven.messages import TextPart
        from raven.terminal.asker import TerminalAsker

        assert self.session is not None
        try:
            files = self._files(text)
        except RavenError as exc:
            self.err.print(f"[red]{escape(str(exc))}[/] (not sent)")
            return
        asker = TerminalAsker(self.err, self.reader, self.view, interactive=True)
        self.view.waiting()
        parts, self.attached = [*self.attached, *files, TextPart(text=text)], []
        await run_turn(self.session, parts, asker, self.view)
        self.view.pause()

    def _files(self, text: str) -> list[Part]:
        """The files `@path` names in `text`, as parts; an `@word` naming no file here is
        just text. Raises `AttachmentError` for a file that cannot go (binary, too big)."""
        from raven.attachments import file_part

        named = dict.fromkeys(m for m in _ATTACHED.findall(text) if (self.cwd / m).is_file())
        for name in named:
            self.err.print(f"[dim]attached {escape(name)}[/]")
        return [file_part(self.cwd / name) for name in named]

    async def _command(self, text: str) -> bool:
        """Run a slash command; False means leave."""
        from raven.errors import RavenError

        name, _, arg = text.partition(" ")
        arg = arg.strip()
        try:
            if name in ("/quit", "/exit"):
                return False
            if name == "/help":
                self.err.print(HELP, markup=False)
            elif name == "/new":
                await self._new()
            elif name == "/sessions":
                await self._list()
            elif name == "/resume":
                chosen = arg or await self.pick()
                if chosen:
                    await self._resume(chosen)
            elif name == "/compact":
                await self._compact()
            elif name == "/model" and not arg:
                self._models()
            elif name == "/mode" and not arg:
                self._modes()
            elif name == "/model" and arg:
                assert self.session is not None
                await self.runtime.set_model(self.session, arg)
                self._model = arg
                self.err.print(f"[dim]model: {escape(arg)}[/]")
            elif name == "/mode" and arg:
                assert self.session is not None
                await self.runtime.set_mode(self.session, arg)
                self._mode = arg
                self.err.print(f"[dim]mode: {escape(arg)}[/]")
                self._sandbox()
            else:
                unknown = f"unknown or incomplete command {name!r}; try /help"
                self.err.print(unknown, style="red", markup=False)
        except RavenError as exc:
            self.err.print(f"[red]{escape(str(exc))}[/]")
        return True

    async def _compact(self) -> None:
        """Summarise the older part of the conversation now; the view shows how it went."""
        from raven.engine.compaction import NothingToCompact

        if self.session is None or self.session.deferred:
            self.err.print("[dim]nothing to compact yet[/]")
            return
        stop = self.session.follow(lambda entry: self._told(entry.event))
        try:
            await self.runtime.compact(self.session)
        except NothingToCompact as exc:
            self.err.print(f"[dim]{escape(str(exc))}[/]")
        finally:
            stop()
            self.view.pause()

    def _told(self, event: object) -> None:
        from raven.engine import CompactionUpdated

        if isinstance(event, CompactionUpdated):
            self.view(event)

    async def _new(self) -> None:
        self.session = await self.runtime.new_session(
            self.cwd, self._model, self._mode, deferred=True
        )
        self.runtime.set_system_prompt(self.session, self.system)
        self._banner()

    async def _resume(self, session_id: str) -> None:
        from raven.terminal.transcript import print_transcript

        found = await self.runtime.find_session(session_id)
        self.session = await self.runtime.open_session(found, reopen=True)
        self.runtime.set_system_prompt(self.session, self.system)
        print_transcript(self.session.record, self.session.window[-20:], self.err)
        self._banner()

    async def pick(self) -> str | None:
        """A recent session, chosen with the arrow keys (or by number); None for none."""
        from raven.terminal.picker import pick

        page = await self.runtime.list_sessions(limit=PICK_LIMIT)
        if not page.sessions:
            self.err.print("[dim]no sessions yet[/]")
            return None
        lines = [
            f"{r.updated_at[:16].replace('T', ' ')}  {r.title or '(untitled)'}  {r.cwd}"
            for r in page.sessions
        ]
        index = await pick(lines, self.err, self.reader, "resume which?")
        return None if index is None else page.sessions[index].id

    async def _list(self) -> None:
        page = await self.runtime.list_sessions(limit=15)
        if not page.sessions:
            self.err.print("[dim]no sessions yet (this one is kept from its first message)[/]")
        for r in page.sessions:
            when = r.updated_at[:16].replace("T", " ")
            self.err.print(f"[dim]{r.id}[/]  {when}  {escape(r.title or '(untitled)')}")

    def _models(self) -> None:
        from raven.config import ECHO_MODEL_ID

        current = self.session.model.id if self.session else None
        configured = [m.id for m in self.runtime.config.models]
        ids = dict.fromkeys([*configured, *([current] if current else []), ECHO_MODEL_ID])
        for model_id in ids:
            mark = "[green]●[/]" if model_id == current else " "
            self.err.print(f"{mark} {escape(model_id)}")
        self.err.print("[dim]/model ID switches[/]")

    def _modes(self) -> None:
        current = self.session.mode.id if self.session and self.session.mode else None
        if not self.runtime.config.modes:
            self.err.print("[dim]no modes are declared in the config[/]")
        for mode in self.runtime.config.modes:
            mark = "[green]●[/]" if mode.id == current else " "
            about = escape(mode.description or mode.name)
            self.err.print(f"{mark} {escape(mode.id)}  [dim]{about}[/]")

    def _sandbox(self) -> None:
        """The sandbox the session's commands run in, and whether it holds (when not off)."""
        from raven.sandbox import enforcement

        assert self.session is not None
        if (level := self.session.sandbox.level) != "off":
            self.err.print(f"sandbox {enforcement(level)}", style="dim", markup=False)

    def _banner(self) -> None:
        s = self.session
        assert s is not None
        mode = s.mode.id if s.mode else "-"
        self.err.print(
            f"[bold]raven[/] · session {s.id} · model {escape(s.model.id)} · mode {escape(mode)}"
        )
        self._sandbox()
        if s.project.files:
            read = ", ".join(s.project.names(s.cwd))
            self.err.print(f"project instructions: {read}", style="dim", markup=False)
