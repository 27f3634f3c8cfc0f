"""Token usage added up from a transcript: the model calls of a session (or of one turn)
and its sub-agents' tasks, by who spent them, with the cost where the config gives
prices. Pure: reads only the messages and prices it is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from raven.messages import AssistantMessage, CompactionMessage, Message, TokenUsage, UserMessage


@dataclass
class Spent:
    """What one spender (a model, a sub-agent) used."""

    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    estimated: int = 0
    """Calls whose server reported no usage."""


@dataclass
class Totals:
    models: dict[str, Spent] = field(default_factory=dict)
    agents: dict[str, Spent] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.models and not self.agents

    def all(self) -> Spent:
        """Everything, models and sub-agents together."""
        whole = Spent()
        for spent in (*self.models.values(), *self.agents.values()):
            whole.input_tokens += spent.input_tokens
            whole.output_tokens += spent.output_tokens
            whole.calls += spent.calls
            whole.estimated += spent.estimated
        return whole


Prices = Mapping[str, tuple[float, float]]
"""Model id → (input, output) price in dollars per million tokens."""


def totals(messages: Iterable[Message]) -> Totals:
    """The usage the messages record, by model and by sub-agent."""
    found = Totals()
    for message in messages:
        count(found, message)
    return found


def count(found: Totals, message: Message) -> None:
    """Add what one message records having used to `found`."""
    usage = None if isinstance(message, UserMessage) else message.usage
    if usage is not None:
        by_model = isinstance(message, AssistantMessage | CompactionMessage)
        into = found.models if by_model else found.agents
        _add(into.setdefault(usage.by, Spent()), usage)


def describe(found: Totals, prices: Prices) -> str:
    """One line for people: "1,204 input, 87 output over 2 model calls; helper: …; $0.0123"."""
    if found.empty:
        return "none reported (no model was called)"
    pieces = []
    for name, spent in found.models.items():
        calls = f" over {spent.calls} model calls" if spent.calls > 1 else ""
        pieces.append(f"{_tokens(spent)}{calls}" + (f" ({name})" if len(found.models) > 1 else ""))
    for name, spent in found.agents.items():
        pieces.append(f"{name}: {_tokens(spent)}")
    line = "; ".join(pieces)
    if (cost := cost_of(found, prices)) is not None:
        line += f"; ${cost:.4f}"
    whole = found.all()
    if whole.estimated == whole.calls:
        line += " (estimated: the server reported no usage)"
    elif whole.estimated:
        line += " (partly estimated: a server reported no usage)"
    return line


def as_json(found: Totals, prices: Prices) -> dict[str, Any]:
    """The totals for programs: by model and by sub-agent, and the cost (null: no price)."""

    def each(spent: Spent) -> dict[str, int]:
        return {
            "inputTokens": spent.input_tokens,
            "outputTokens": spent.output_tokens,
            "calls": spent.calls,
            "estimatedCalls": spent.estimated,
        }

    return {
        "models": {name: each(spent) for name, spent in found.models.items()},
        "agents": {name: each(spent) for name, spent in found.agents.items()},
        "costUsd": cost_of(found, prices),
    }


def cost_of(found: Totals, prices: Prices) -> float | None:
    """Dollars spent on the priced models; None when none of them has a price."""
    priced = [(prices[m], s) for m, s in found.models.items() if m in prices]
    if not priced:
        return None
    return sum(i * s.input_tokens / 1e6 + o * s.output_tokens / 1e6 for (i, o), s in priced)


def _add(spent: Spent, usage: TokenUsage) -> None:
    spent.input_tokens += usage.input_tokens
    spent.output_tokens += usage.output_tokens
    spent.calls += 1
    spent.estimated += usage.estimated


def _tokens(spent: Spent) -> str:
    about = "about " if spent.estimated == spent.calls else ""
    return f"{about}{spent.input_tokens:,} input, {spent.output_tokens:,} output"
