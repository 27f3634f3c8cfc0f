"""`raven sessions list | show | delete`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import typer

from raven.cli import complete
from raven.cli.help import Typer
from raven.cli.options import ConfigOption

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from rich.text import Text

    from raven.broker.task import BrokerTask
    from raven.config import RavenConfig
    from raven.engine import Runtime
    from raven.messages import Message
    from raven.sessions import SessionRecord, Sessions

    _Read = tuple[SessionRecord, list[Message], dict[str, tuple[float, float]], list[BrokerTask]]

T = TypeVar("T")

app = Typer(help="List, show and delete stored sessions.", no_args_is_help=True)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _ask(config: str | None, call: Callable[[Runtime], Awaitable[T]]) -> T:
    """What `call` gets from the engine's runtime over the stored sessions (to change one:
    the engine owns a session's life)."""
    import asyncio

    from raven.cli.options import load
    from raven.engine import Runtime

    cfg, paths = load(config, "cli")

    async def ask() -> T:
        runtime = Runtime(cfg, paths, face="cli")
        try:
            return await call(runtime)
        finally:
            await runtime.aclose()

    return asyncio.run(ask())


def _look(config: str | None, call: Callable[[Sessions, RavenConfig], Awaitable[T]]) -> T:
    """What `call` reads from the session store (given the config too); reading needs
    neither the engine nor its tools, so listing costs what the store costs."""
    import asyncio

    from raven.cli.options import load
    from raven.sessions.store import open_sessions

    cfg, paths = load(config, "cli")

    async def look() -> T:
        store = open_sessions(cfg.sessions, paths)
        try:
            return await call(store, cfg)
        finally:
            await store.aclose()

    return asyncio.run(look())


def _read(config: str | None, session_id: str, with_tasks: bool = False) -> _Read:
    """The session a whole id or unique prefix names, its transcript, the models' prices
    (for its cost), and, `with_tasks`, the tasks its sub-agents gave each other."""

    async def read(store: Sessions, cfg: RavenConfig) -> _Read:
        full_id = await store.resolve(session_id)
        record, messages = await store.get(full_id), await store.messages(full_id)
        if not with_tasks:
            return record, messages, cfg.prices(), []
        from raven.broker.broker import tasks_of

        return record, messages, cfg.prices(), await tasks_of(store, full_id)

    return _look(config, read)


@app.command("list")
def list_command(
    cwd: Annotated[
        str | None, typer.Option("--cwd", help="Only sessions in this directory.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many.")] = 50,
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """List sessions, newest first."""
    import json
    from pathlib import Path

    where = str(Path(cwd).expanduser().resolve()) if cwd else None
    page = _look(config, lambda store, _: store.page(where, None, limit, None))
    if as_json:
        typer.echo(json.dumps([_record_json(r) for r in page.sessions], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(markup=False, highlight=False)
    if not page.sessions:
        console.print("no sessions")
        return
    # The id, the date and the model are shown whole at any width; the title and the
    # directory share what is left (two to one), the directory dropped when too narrow.
    ids = max(len(r.id) for r in page.sessions)
    models = min(max(len(r.model or "-") for r in page.sessions), 24)
    fixed = ids + 16 + max(models, 5) + 2 * 3  # and three gaps of two
    left = max(console.width - fixed, 8)
    console.width = fixed + left  # wider than a very narrow terminal, not a cut id
    with_cwd = left >= 30
    table = Table(box=None, pad_edge=False)
    table.add_column("id", no_wrap=True, width=ids)
    table.add_column("updated", no_wrap=True, width=16)
    table.add_column("model", no_wrap=True, overflow="ellipsis", width=max(models, 5))
    rows = [
        [r.id, r.updated_at[:16].replace("T", " "), r.model or "-", r.title or "(untitled)", r.cwd]
        for r in page.sessions
    ]
    titles, cwds = (max(len(row[i]) for row in rows) for i in (3, 4))
    if with_cwd:
        left -= 2
        titles = min(titles, left - min(cwds, left // 3))
        cwds = min(cwds, left - titles)
    table.add_column("title", no_wrap=True, overflow="ellipsis", width=max(min(titles, left), 5))
    if with_cwd:
        table.add_column("cwd", no_wrap=True, overflow="ellipsis", width=cwds)
    for row in rows:
        table.add_row(*row[: 5 if with_cwd else 4])
    # Titles, models and paths are text, never markup: "[long] talk" is shown as typed.
    console.print(table)


@app.command("show")
def show_command(
    session_id: Annotated[
        str,
        typer.Argument(
            help="Session id, or a unique prefix of it.", autocompletion=complete.session_ids
        ),
    ],
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Print a session's transcript, tool calls and results included, and the tokens it
    used (its sub-agents' too), with their cost where the config gives prices."""
    from raven.usage import as_json as usage_json
    from raven.usage import describe, totals

    record, messages, prices, tasks = _read(config, session_id, with_tasks=True)
    spent = totals(messages)
    if as_json:
        views = [t.view() for t in tasks]
        typer.echo(_transcript_json(record, messages, usage_json(spent, prices), views))
        return
    from raven.terminal.transcript import print_transcript

    print_transcript(record, messages)
    if tasks:
        typer.echo("\nTasks its sub-agents gave each other:")
        for task in reversed(tasks):
            asked = task.messages[0].text.splitlines()[0][:60] if task.messages else ""
            typer.echo(f"  {task.id}  {task.requester} → {task.worker}  {task.state}  {asked}")
    typer.echo(f"\nToken usage: {describe(spent, prices)}")


@app.command("search")
def search_command(
    text: Annotated[str, typer.Argument(help="Words to find (all of them).")],
    cwd: Annotated[
        str | None, typer.Option("--cwd", help="Only sessions in this directory.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many.")] = 20,
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Find sessions whose transcripts (tool calls and results too) hold these words."""
    import json
    from pathlib import Path

    from raven.redact import redact
    from raven.sessions import MATCH_END, MATCH_START

    where = str(Path(cwd).expanduser().resolve()) if cwd else None
    hits = _look(config, lambda store, _: store.search(text, where, limit))
    if as_json:
        body = [
            {
                **_record_json(h.record),
                "title": redact(h.record.title),
                "snippet": redact(h.snippet).replace(MATCH_START, "[").replace(MATCH_END, "]"),
            }
            for h in hits
        ]
        typer.echo(json.dumps(body, indent=2))
        return
    from rich.console import Console
    from rich.text import Text

    console = Console(highlight=False)
    if not hits:
        console.print(f"nothing found for {text!r}", markup=False)
    for hit in hits:
        r = hit.record
        head = Text(f"{r.id}", style="bold")
        head.append(f"  {r.updated_at[:16].replace('T', ' ')}  {redact(r.title)}")
        console.print(head)
        console.print(_highlighted(redact(hit.snippet)))


def _highlighted(snippet: str) -> Text:
    """The snippet with the words found in bold yellow."""
    from rich.text import Text

    from raven.sessions import MATCH_END, MATCH_START

    shown = Text("  ")
    for i, piece in enumerate(snippet.replace(MATCH_END, MATCH_START).split(MATCH_START)):
        shown.append(piece, style="bold yellow" if i % 2 else "")
    return shown


@app.command("export")
def export_command(
    session_id: Annotated[
        str,
        typer.Argument(
            help="Session id, or a unique prefix of it.", autocompletion=complete.session_ids
        ),
    ],
    fmt: Annotated[
        Literal["markdown", "json"], typer.Option("--format", "-f", help="markdown or json.")
    ] = "markdown",
    config: ConfigOption = None,
) -> None:
    """Write a readable transcript to stdout, tool calls and results included, secrets masked."""
    from raven.terminal.transcript import markdown_transcript

    record, messages, _, _ = _read(config, session_id)
    if fmt == "json":
        typer.echo(_transcript_json(record, messages))
        return
    typer.echo(markdown_transcript(record, messages))


@app.command("delete")
def delete_command(
    session_id: Annotated[
        str,
        typer.Argument(
            help="Session id, or a unique prefix of it.", autocompletion=complete.session_ids
        ),
    ],
    config: ConfigOption = None,
) -> None:
    """Delete a session and its transcript (refused while a turn runs in it)."""

    async def delete(runtime: Runtime) -> str:
        full_id = await runtime.find_session(session_id)
        await runtime.delete_session(full_id)
        return full_id

    typer.echo(f"deleted {_ask(config, delete)}")


def _transcript_json(
    record: SessionRecord,
    messages: list[Message],
    usage: dict[str, Any] | None = None,
    tasks: list[dict[str, Any]] | None = None,
) -> str:
    """A session and its transcript as JSON (camelCase), credentials masked; with the
    tokens it used and its sub-agents' tasks, when given."""
    import json

    from raven.messages import MESSAGE_ADAPTER
    from raven.redact import redact, redact_json
    from raven.terminal.transcript import masked

    body = {
        **_record_json(record),
        "title": redact(record.title),
        "messages": [
            MESSAGE_ADAPTER.dump_python(m, mode="json", by_alias=True) for m in masked(messages)
        ],
        **({"usage": usage} if usage is not None else {}),
        **({"agentTasks": redact_json(tasks)} if tasks else {}),
    }
    return json.dumps(body, indent=2, ensure_ascii=False)


def _record_json(r: SessionRecord) -> dict[str, object]:
    return {
        "id": r.id,
        "cwd": r.cwd,
        "title": r.title,
        "mode": r.mode,
        "model": r.model,
        "face": r.face,
        "createdAt": r.created_at,
        "updatedAt": r.updated_at,
        "closed": r.closed,
        "failure": r.failure,
    }
