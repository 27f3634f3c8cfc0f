from __future__ import annotations

from a2a.server.request_handlers.response_helpers import agent_card_to_dict

from raven.a2a.card import (
    SANDBOX_EXTENSION_URI,
    SUBAGENTS_EXTENSION_URI,
    agent_card,
    extended_card,
    served_card,
)


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


def test_the_card_says_what_raven_s_commands_run_in() -> None:
    stated = {"level": "strict", "required": False, "enforced": True}
    body = agent_card_to_dict(agent_card("http://127.0.0.1:8710/a2a", sandbox=stated))
    (ext,) = body["capabilities"]["extensions"]
    assert ext["uri"] == SANDBOX_EXTENSION_URI and ext["params"] == stated


def test_a_served_agents_card_is_its_own() -> None:
    class About:
        name = "codex"
        title = "Codex"
        description = "Writes code"
        version = "2.6.0"

    body = agent_card_to_dict(served_card("http://127.0.0.1:8710/a2a/agents/codex", About()))
    assert (body["name"], body["description"], body["version"]) == (
        "Codex",
        "Writes code",
        "2.6.0",
    )
    assert [s["id"] for s in body["skills"]] == ["codex"]
    assert "extensions" not in body["capabilities"]  # Raven's sandbox is not the agent's
