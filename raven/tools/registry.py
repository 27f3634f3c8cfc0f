"""The set of built-in tools a session starts with."""

from __future__ import annotations

from raven.tools.ask import AskUser
from raven.tools.base import Tool
from raven.tools.files import EditFile, ListDir, ReadFile, WriteFile
from raven.tools.plan import UpdatePlan
from raven.tools.search import Search
from raven.tools.shell import RunCommand


def builtin_tools() -> list[Tool]:
    return [
        ReadFile(),
        WriteFile(),
        EditFile(),
        ListDir(),
        Search(),
        RunCommand(),
        AskUser(),
        UpdatePlan(),
    ]
