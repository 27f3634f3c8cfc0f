"""The chat's prompt on a terminal: line editing, history across runs, a pasted block as
one message, Ctrl-L, and completion of `/commands` and `@paths`.

Built on prompt_toolkit, which only this module imports: only `raven chat` on a terminal
loads it, so no other command's start-up pays for it. The history is one file per
project directory, kept 0600 (it holds what was typed). Reads the terminal only while
asked for a line; never prints but the prompt.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from prompt_toolkit import PromptSession
from prompt_toolkit.completion import CompleteEvent, Completer, Completion
from prompt_toolkit.document import Document
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.history import FileHistory
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

from raven.private_files import private_file

MAX_COMPLETIONS = 50
"""At most this many paths offered for one `@`."""
_AT_PATH = re.compile(r"(?:^|\s)@(\S*)$")


def history_file(data_dir: Path, cwd: Path) -> Path:
    """Where the prompt's history for the project in `cwd` is kept (0600)."""
    digest = hashlib.sha256(str(cwd).encode()).hexdigest()[:16]
    return private_file(data_dir / "chat-history" / f"{digest}.txt")


class ChatPrompt:
    """Reads one message at a time from the terminal, as a person edits it."""

    def __init__(
        self, history: Path, cwd: Path, commands: Sequence[str], continuation: str
    ) -> None:
        keys = KeyBindings()

        @keys.add("escape", "enter")  # Alt-Enter (or Esc, Enter): a new line, not sent
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        self._session: PromptSession[str] = PromptSession(
            history=FileHistory(str(history)),
            completer=_ChatCompleter(cwd, commands),
            complete_while_typing=False,
            key_bindings=keys,
            prompt_continuation=continuation,
            enable_open_in_editor=False,
        )

    async def read(self, prompt: str) -> str | None:
        """The next message as typed (a paste keeps its lines); None on Ctrl-D. Ctrl-C
        raises `KeyboardInterrupt`, for the chat to say how to leave."""
        try:
            # The chat's own SIGINT handler stays: it cancels a turn while no prompt runs
            # (in the prompt, Ctrl-C is a key that raises KeyboardInterrupt).
            message = FormattedText([("bold", prompt)])
            return await self._session.prompt_async(message, handle_sigint=False)
        except EOFError:
            return None


class _ChatCompleter(Completer):
    """`/commands` at the start of the line; `@path` anywhere, relative to the project."""

    def __init__(self, cwd: Path, commands: Sequence[str]) -> None:
        self._cwd, self._commands = cwd, commands

    def get_completions(
        self, document: Document, complete_event: CompleteEvent
    ) -> Iterable[Completion]:
        before = document.text_before_cursor
        if before.startswith("/") and " " not in before:
            for command in self._commands:
                if command.startswith(before):
                    yield Completion(command, start_position=-len(before))
            return
        found = _AT_PATH.search(before)
        if found is not None:
            typed = found.group(1)
            for path in _paths_under(self._cwd, typed):
                yield Completion(path, start_position=-len(typed))


def _paths_under(cwd: Path, typed: str) -> list[str]:
    """Paths beginning with `typed` (relative to `cwd`), folders ending in `/`; hidden
    entries only when asked for with a leading dot."""
    folder, _, start = typed.rpartition("/")
    base = cwd / folder if folder else cwd
    try:
        entries = sorted(os.scandir(base), key=lambda e: e.name)
    except OSError:
        return []
    found = []
    for entry in entries:
        if not entry.name.startswith(start) or (entry.name[0] == "." and not start[:1] == "."):
            continue
        shown = f"{folder}/{entry.name}" if folder else entry.name
        found.append(shown + "/" if entry.is_dir() else shown)
        if len(found) == MAX_COMPLETIONS:
            break
    return found
