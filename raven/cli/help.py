"""How `--help` reads: `[OPTIONS] PROMPT` in usage lines and flags shown without a type.

Typer's own rendering shows required arguments as `{prompt}` and flags as taking
a `<bool>`; these classes, handed to typer through its `cls` seams, render them
the way users of command-line tools expect. Changes nothing but help text.
"""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption


def _plain(params: list[Any]) -> None:
    for param in params:
        if isinstance(param, TyperArgument) and param.metavar is None:
            param.metavar = (param.name or "").upper()
        elif isinstance(param, TyperOption) and param.is_flag and param.metavar is None:
            param.metavar = ""


def _usage(pieces: list[str]) -> list[str]:
    return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]


class _PlainHelp:
    """Flags without a type in the help, `--help` included."""

    def get_help_option(self, ctx: Any) -> Any:
        option = super().get_help_option(ctx)  # type: ignore[misc]
        _plain([option])
        return option


class Command(_PlainHelp, TyperCommand):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain(self.params)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        return _usage(super().collect_usage_pieces(ctx))


class Group(_PlainHelp, TyperGroup):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        _plain(self.params)


class Typer(typer.Typer):
    """`typer.Typer` whose groups and commands render help as above, in plain text.

    Plain, because typer's rich rendering imports most of rich (about 70 ms) before
    it prints a line, and `--help` is what people type most.
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", Group)
        super().__init__(rich_markup_mode=None, **kwargs)

    def command(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.setdefault("cls", Command)
        return super().command(*args, **kwargs)
