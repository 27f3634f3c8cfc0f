"""Text people and models write is shown as written by every command that prints it: square
brackets are never read as terminal markup (`[red]x[/red]` stays, `[long] talk` keeps its
first word, `[/etc/hosts]` is no markup error)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.conftest import raven, write_config

TITLE = "why is [/etc/hosts] ignored? [red]x[/red] [long] talk"
FILE = "[b]notes[/b].txt"
ANSWER = "Fixed [bold]it[/bold]; see [/etc/hosts] and [link=http://x]here[/link]."


def test_markup_looking_text_is_shown_as_written_everywhere(
    env: dict[str, str], home: Path, tmp_path: Path
) -> None:
    steps = [
        {"toolCalls": [{"name": "write_file", "arguments": {"path": FILE, "content": "[i]\n"}}]},
        {"text": ANSWER},
    ]
    (home / "script.json").write_text(json.dumps(steps))
    write_config(
        home,
        {
            "models": [{"id": "[s]cripted", "provider": "scripted", "script": "script.json"}],
            "modes": [{"id": "auto", "name": "Auto", "approvals": "auto"}],
        },
    )
    wide = {**env, "COLUMNS": "300"}
    ran = raven("run", "-m", "[s]cripted", TITLE, env=wide, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ANSWER in ran.stdout
    assert f"✓ Write {FILE}" in ran.stderr
    assert "model [s]cripted" in ran.stderr
    assert (tmp_path / FILE).read_text() == "[i]\n"

    listed = raven("sessions", "list", env=wide)
    assert listed.returncode == 0, listed.stderr
    assert TITLE in listed.stdout and "[s]cripted" in listed.stdout
    session = listed.stdout.split("ses_")[1].split()[0]
    narrow = raven("sessions", "list", env={**env, "COLUMNS": "80"}).stdout.splitlines()
    assert all(len(line) <= 80 for line in narrow), narrow
    assert re.search(r"ses_\w{32}  \d{4}-\d\d-\d\d \d\d:\d\d  \[s\]cripted  why is", narrow[1])

    shown = raven("sessions", "show", f"ses_{session}", env=wide)
    assert shown.returncode == 0, shown.stderr
    for text in (TITLE, ANSWER, FILE, "model [s]cripted"):
        assert text in shown.stdout, text

    nothing = raven("sessions", "search", "[zz]", env=wide)
    assert nothing.returncode == 0 and "nothing found for '[zz]'" in nothing.stdout

    models = raven("models", env=wide)
    assert "[s]cripted" in models.stdout and "default: [s]cripted" in models.stdout

    chat = raven(
        "chat", "-m", "[s]cripted", env=wide, cwd=tmp_path, input="/sessions\n/model\n/quit\n"
    )
    assert chat.returncode == 0, chat.stderr
    assert TITLE in chat.stderr and "● [s]cripted" in chat.stderr
