"""`raven sessions list | show | delete`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from raven.cli.help import Typer
from raven.cli.options import ConfigOption

if TYPE_CHECKING:
    from raven.sessions import SessionRecord, SessionStore

app = Typer(help="List, show and delete stored sessions.", no_args_is_help=True)

JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON.")]


def _store(config: str | None) -> SessionStore:
    from raven.cli.options import load
    from raven.sessions import SessionStore

    _, paths = load(config, "cli")
    return SessionStore(paths.database)


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

    store = _store(config)
    page = store.page(cwd=cwd, limit=limit)
    if as_json:
        typer.echo(json.dumps([_record_json(r) for r in page.sessions], indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("id", "updated", "title", "cwd", box=None)
    for r in page.sessions:
        table.add_row(r.id, r.updated_at[:19].replace("T", " "), r.title, r.cwd)
    Console().print(table if page.sessions else "no sessions")


@app.command("show")
def show_command(
    session_id: Annotated[str, typer.Argument(help="Session id.")],
    as_json: JsonOption = False,
    config: ConfigOption = None,
) -> None:
    """Print a session's transcript, tool calls and results included."""
    import json

    from raven.messages import MESSAGE_ADAPTER

    store = _store(config)
    record = store.get(session_id)
    messages = store.messages(session_id)
    if as_json:
        body = {
            **_record_json(record),
            "messages": [
                MESSAGE_ADAPTER.dump_python(m, mode="json", by_alias=True) for m in messages
            ],
        }
        typer.echo(json.dumps(body, indent=2))
        return
    from raven.cli.transcript import print_transcript

    print_transcript(record, messages)


@app.command("delete")
def delete_command(
    session_id: Annotated[str, typer.Argument(help="Session id.")],
    config: ConfigOption = None,
) -> None:
    """Delete a session and its transcript."""
    from raven.sessions import SessionNotFound

    if not _store(config).delete(session_id):
        raise SessionNotFound(session_id)
    typer.echo(f"deleted {session_id}")


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
    }
