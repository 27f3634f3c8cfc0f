"""A model for compaction tests, served by `FakeModelServer`: it answers each turn with
about 300 characters, and a summary request (Raven's summariser prompt) with a summary
that keeps the secret the first turn told, when the conversation it reads holds it."""

from __future__ import annotations

from typing import Any

from tests.fakes.model_server import Reply, openai_stream

WINDOW = 2_000
"""The context window, in tokens, of the model these tests configure and the server holds."""
SECRET = "the release is code-named plum"


def summarising(body: dict[str, Any]) -> bool:
    """The Chat Completions request is Raven's summariser's."""
    return "<conversation>" in body["messages"][0]["content"]


def compacting_model(body: dict[str, Any]) -> Reply:
    if summarising(body):
        read = body["messages"][0]["content"]
        kept = f"Summary: {SECRET}." if "plum" in read else "Summary: nothing."
        return Reply(events=openai_stream(text=kept, usage=None))
    return Reply(events=openai_stream(text="noted " * 50, usage=None))
