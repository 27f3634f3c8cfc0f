"""Bad command-line input gets typer's usage message or a clear error, never a traceback."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import raven, write_config


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["demo-does-not-exist"], "No such command"),
        (["run"], "the prompt is empty"),
        (["run", "   "], "the prompt is empty"),
        (["run", "--no-such-flag", "hi"], "No such option"),
        (["run", "hi", "--model"], "requires an argument"),
        (["sessions", "list", "--limit", "many"], "valid integer"),
    ],
)
def test_usage_errors_print_usage_and_exit_2(
    args: list[str], says: str, env: dict[str, str]
) -> None:
    result = raven(*args, env=env)
    assert result.returncode == 2, result.stderr
    assert "Error:" in result.stderr and says in result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr and "unexpected error" not in result.stderr


def test_unknown_command_shows_the_usage_line(env: dict[str, str]) -> None:
    result = raven("nope", env=env)
    assert result.stderr.startswith("Usage: raven [OPTIONS] COMMAND")
    assert "Try 'raven --help'" in result.stderr


def test_version_names_python_and_the_config_in_use(env: dict[str, str], tmp_path: Path) -> None:
    from raven import __version__

    chosen = tmp_path / "elsewhere.json"
    result = raven("--version", env={**env, "RAVEN_CONFIG": str(chosen)})
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"raven {__version__}"
    assert sys.version.split()[0] in lines[1]
    assert lines[2] == f"config {chosen}"


def test_config_that_is_not_utf8_is_exit_2_naming_the_file(env: dict[str, str], home: Path) -> None:
    (home / "config.json").write_bytes(b'{"defaultModel": "caf\xe9"}')
    result = raven("run", "--model", "echo", "hi", env=env)
    assert result.returncode == 2
    assert str(home / "config.json") in result.stderr and "UTF-8" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("how", ["option", "env"])
def test_a_named_config_file_that_is_missing_is_an_error(
    how: str, env: dict[str, str], tmp_path: Path
) -> None:
    typo = tmp_path / "confg.json"
    args = ["--config", str(typo)] if how == "option" else []
    run_env = {**env, "RAVEN_CONFIG": str(typo)} if how == "env" else env
    for command in (["run", "--model", "echo", "hi"], ["sessions", "list"], ["acp"]):
        result = raven(*command[:1], *command[1:], *args, env=run_env, input="")
        assert result.returncode == 2, (command, result.stderr)
        assert str(typo) in result.stderr and "no such config file" in result.stderr
    assert not typo.exists()


def test_config_init_creates_a_named_file(env: dict[str, str], tmp_path: Path) -> None:
    target = tmp_path / "new.json"
    result = raven("config", "init", "--config", str(target), env=env)
    assert result.returncode == 0, result.stderr
    written = json.loads(target.read_text())  # no key set: no model, and never echo
    assert "defaultModel" not in written and not written.get("models")
    assert "raven setup" in result.stderr and "raven models add" in result.stderr
    keyed = tmp_path / "keyed.json"
    result = raven("config", "init", "--config", str(keyed), env={**env, "OPENAI_API_KEY": "k"})
    written = json.loads(keyed.read_text())
    assert written["defaultModel"] == "gpt" and [m["id"] for m in written["models"]] == ["gpt"]
    assert "default model: gpt" in result.stdout


def test_config_init_adds_starter_keys_and_keeps_those_set(env: dict[str, str], home: Path) -> None:
    write_config(home, {"a2a": {"server": {"token": "t" * 24}}, "limits": {"maxTurnSteps": 7}})
    result = raven("config", "init", env=env)
    assert result.returncode == 0, result.stderr
    data = json.loads((home / "config.json").read_text())
    assert data["a2a"]["server"]["token"] == "t" * 24
    assert data["limits"] == {"maxTurnSteps": 7}
    assert "defaultModel" not in data and {m["id"] for m in data["modes"]} >= {"ask"}
    again = raven("config", "init", env=env)
    assert again.returncode == 0 and "nothing changed" in again.stdout


def test_a2a_enable_before_config_init_never_makes_peers_talk_to_an_echo(
    env: dict[str, str], home: Path
) -> None:
    result = raven("a2a", "enable", env=env)
    assert result.returncode == 0, result.stderr
    assert "peers cannot be answered yet" in result.stderr and "raven setup" in result.stderr
    data = json.loads((home / "config.json").read_text())
    assert data["a2a"]["server"]["enabled"] is True and data["a2a"]["server"]["token"]
    assert {m["id"] for m in data["modes"]} >= {"ask"} and "defaultModel" not in data
    served = raven("a2a", "serve", "--port", "0", env=env)  # refuses, rather than echo
    assert served.returncode == 2 and "no model is configured" in served.stderr


def test_the_prompt_comes_from_stdin_when_piped_or_dash(env: dict[str, str]) -> None:
    piped = raven("run", "--model", "echo", env=env, input="from a pipe\n")
    assert piped.returncode == 0 and piped.stdout == "from a pipe\n"
    dash = raven("run", "--model", "echo", "-", env=env, input="dash reads stdin")
    assert dash.returncode == 0 and dash.stdout.strip() == "dash reads stdin"
    huge = raven("run", "--model", "echo", "-", env=env, input="x" * (1024 * 1024 + 1))
    assert huge.returncode == 2 and "more than 1048576 bytes" in huge.stderr


@pytest.mark.parametrize(
    "command",
    [["run"], ["chat"], ["acp"], ["sessions", "show"], ["config", "init"], ["a2a", "send"]],
)
def test_help_reads_as_users_expect(command: list[str], env: dict[str, str]) -> None:
    result = raven(*command, "--help", env={**env, "COLUMNS": "120"})
    assert result.returncode == 0, result.stderr
    usage = next(line for line in result.stdout.splitlines() if "Usage:" in line)
    assert f"raven {' '.join(command)} [OPTIONS]" in usage
    assert "{" not in usage and "}" not in usage
    assert "<bool>" not in result.stdout
    for line in result.stdout.splitlines():
        if "--help" in line or "--json" in line or "--yes" in line:
            assert "<" not in line, line


def test_help_is_plain_text_printed_without_loading_rich(env: dict[str, str]) -> None:
    import subprocess

    from tests.conftest import RAVEN

    result = subprocess.run(
        [*RAVEN[:1], "-X", "importtime", *RAVEN[1:], "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0
    assert result.stdout.startswith("Usage: raven [OPTIONS] COMMAND")
    assert "╭" not in result.stdout
    imported = {line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines()}
    assert "typer" in imported
    assert sorted(m for m in imported if m.split(".")[0] == "rich") == []
