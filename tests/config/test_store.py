from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
from pydantic import BaseModel

from raven.config import (
    EXAMPLE_FILE,
    A2AClientConfig,
    A2AConfig,
    A2APeer,
    A2AServerConfig,
    AgentSpec,
    BrokerConfig,
    ConfigError,
    GatewayConfig,
    Limits,
    McpHttpServer,
    McpStdioServer,
    ModelSpec,
    ModeSpec,
    RavenConfig,
    load_config,
    masked,
    resolve_paths,
    save_config,
)
from raven.config.store import holds_secret, starter_config


def test_missing_file_is_the_empty_config(tmp_path: Path) -> None:
    config = load_config(tmp_path / "nope.json")
    assert config.models == [] and config.limits.max_turn_steps == 50


def test_invalid_json_names_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{\n  "models": [\n    {"id": "a",}\n  ]\n}')
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(path) in str(info.value) and "line 3" in str(info.value)
    assert info.value.exit_code == 2


def test_unknown_keys_are_named_by_path(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"models": [{"id": "a", "provider": "openai", "colour": 1}]}))
    with pytest.raises(ConfigError, match=r"models\[0\]\.colour: unknown key"):
        load_config(path)


def test_bad_values_are_named_by_path(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"limits": {"maxTurnSteps": 0}}))
    with pytest.raises(ConfigError, match=r"limits\.maxTurnSteps"):
        load_config(path)


def test_default_model_must_exist(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"defaultModel": "ghost"}))
    with pytest.raises(ConfigError, match="defaultModel 'ghost'"):
        load_config(path)


def test_save_is_atomic_private_and_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "config.json"
    starter = starter_config({"ANTHROPIC_API_KEY": "k"})
    save_config(starter, path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_config(path) == starter
    assert [p.name for p in path.parent.iterdir()] == ["config.json"]
    assert '"defaultModel": "claude"' in path.read_text()
    assert (
        "echo" not in path.read_text() and '"k"' not in path.read_text()
    )  # names the key, never holds it


def test_masked_hides_secrets_only() -> None:
    data = {"models": [{"id": "a", "apiKey": "sk-live"}], "a2a": {"token": "t", "path": "/a2a"}}
    assert masked(data) == {
        "models": [{"id": "a", "apiKey": "***"}],
        "a2a": {"token": "***", "path": "/a2a"},
    }


def test_raven_home_puts_everything_under_it(tmp_path: Path) -> None:
    paths = resolve_paths(None, {"RAVEN_HOME": str(tmp_path)})
    assert paths.config_file == tmp_path / "config.json"
    assert paths.database.is_relative_to(tmp_path)
    assert paths.logs_dir == tmp_path / "logs"


def test_config_option_beats_raven_config(tmp_path: Path) -> None:
    env = {"RAVEN_HOME": str(tmp_path), "RAVEN_CONFIG": str(tmp_path / "env.json")}
    assert resolve_paths(None, env).config_file == tmp_path / "env.json"
    assert resolve_paths(str(tmp_path / "opt.json"), env).config_file == tmp_path / "opt.json"


def test_example_config_is_valid_and_shows_every_key() -> None:
    example = EXAMPLE_FILE
    load_config(example)
    data = json.loads(example.read_text())

    def aliases(model: type[BaseModel]) -> set[str]:
        return {f.alias or name for name, f in model.model_fields.items()}

    assert aliases(RavenConfig) <= set(data)
    assert aliases(ModelSpec) <= {k for m in data["models"] for k in m}
    assert aliases(ModeSpec) <= {k for m in data["modes"] for k in m}
    assert aliases(Limits) <= set(data["limits"])
    assert aliases(McpStdioServer) <= set(data["mcpServers"][0])
    assert aliases(McpHttpServer) <= set(data["mcpServers"][1])
    assert aliases(A2AConfig) <= set(data["a2a"])
    assert aliases(A2AServerConfig) <= set(data["a2a"]["server"])
    assert aliases(A2APeer) <= set(data["a2a"]["peers"][0])
    assert aliases(A2AClientConfig) <= set(data["a2a"]["client"])
    assert aliases(AgentSpec) <= set(data["agents"][0])
    assert aliases(BrokerConfig) <= set(data["broker"])
    assert aliases(GatewayConfig) <= set(data["gateway"])


def test_agents_are_typed_and_named_once(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"agents": [{"name": "a", "command": "x", "permissions": "all"}]}))
    with pytest.raises(ConfigError, match=r"agents\[0\]\.permissions"):
        load_config(path)
    twice = [{"name": "a", "command": "x"}, {"name": "a", "command": "y"}]
    path.write_text(json.dumps({"agents": twice}))
    with pytest.raises(ConfigError, match="agents"):
        load_config(path)
    path.write_text(json.dumps({"agents": [{"name": "a", "command": "x", "enabled": False}]}))
    assert load_config(path).roster() == []


def test_peer_origins_are_checked_and_named(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(
        json.dumps(
            {
                "a2a": {
                    "peers": [
                        {"origin": "https://ok.example", "credential": "c"},
                        {"origin": "https://peer.example/path", "credential": "c"},
                    ]
                }
            }
        )
    )
    with pytest.raises(ConfigError, match=r"a2a\.peers\[1\]\.origin: .*not an origin"):
        load_config(path)


def test_masked_hides_mcp_env_headers_and_url_passwords() -> None:
    data = {
        "mcpServers": [
            {
                "name": "gh",
                "command": "gh-mcp",
                "env": {"GITHUB_TOKEN": "plain-value", "DEBUG": ""},
            },
            {
                "name": "web",
                "url": "https://x/mcp",
                "headers": {"Authorization": "Bearer abcdefghijk"},
            },
        ],
        "models": [{"id": "m", "baseUrl": "https://user:hunter2@llm.example/v1"}],
    }
    shown = json.dumps(masked(data))
    assert "plain-value" not in shown and "abcdefghijk" not in shown and "hunter2" not in shown
    assert masked(data)["mcpServers"][0]["env"] == {"GITHUB_TOKEN": "***", "DEBUG": ""}
    assert "llm.example/v1" in shown and '"command": "gh-mcp"' in shown


def test_a_placeholder_key_or_a_plain_env_is_no_secret() -> None:
    def config(**model: object) -> RavenConfig:
        spec = {"id": "m", "provider": "openai", **model}
        return RavenConfig.model_validate({"models": [spec]})

    for placeholder in ("none", "EMPTY", "sk-no-key-required", "ollama", "x"):
        assert not holds_secret(config(apiKey=placeholder)), placeholder
    assert holds_secret(config(apiKey="sk-abc"))
    assert holds_secret(config(baseUrl="https://user:hunter2@example.com/v1"))

    def agent(**env: str) -> RavenConfig:
        spec = {"name": "helper", "command": "helper-acp", "env": env}
        return RavenConfig.model_validate({"agents": [spec]})

    assert not holds_secret(agent(FOO="bar", RUST_LOG="debug", HOME="/home/me"))
    assert holds_secret(agent(GITHUB_TOKEN="gho_abcdefabcdef"))
    assert holds_secret(agent(CONFIG="ghp_" + "a" * 36))  # a known key shape, by any name
    assert not holds_secret(agent(API_KEY="none"))


def test_an_agents_peers_name_configured_agents(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    agents = [{"name": "a", "command": "x", "peers": ["b", "ghost"]}, {"name": "b", "command": "y"}]
    path.write_text(json.dumps({"agents": agents}))
    with pytest.raises(ConfigError, match=r"agent 'a' names peers not among agents: \['ghost'\]"):
        load_config(path)
    agents[0]["peers"] = ["b"]
    path.write_text(json.dumps({"agents": agents, "broker": {"maxDepth": 2}}))
    loaded = load_config(path)
    assert loaded.agents[0].peers == ["b"] and loaded.broker.max_depth == 2
