from __future__ import annotations

from a2a.server.request_handlers.response_helpers import agent_card_to_dict

from raven.a2a.card import SUBAGENTS_EXTENSION_URI, agent_card, extended_card


def test_public_card_never_lists_sub_agents_and_extended_does() -> None:
    roster = [{"name": "codex", "description": "Codex"}]
    public = agent_card("https://raven.example/a2a", roster)
    body = agent_card_to_dict(public)
    assert body["capabilities"]["extendedAgentCard"] is True
    assert "codex" not in str(body) and "url" not in body
    extended = agent_card_to_dict(extended_card(public, roster))
    (ext,) = extended["capabilities"]["extensions"]
    assert ext["uri"] == SUBAGENTS_EXTENSION_URI
    assert ext["params"] == {"agents": roster, "callable": False}


def test_without_a_roster_there_is_no_extended_card() -> None:
    body = agent_card_to_dict(agent_card("http://127.0.0.1:8710/a2a"))
    assert body["capabilities"].get("extendedAgentCard", False) is False
