"""`raven setup` launched as a newcomer runs it, answering its questions on stdin, against a
loopback server speaking the OpenAI wire format."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from raven.cli.setup_cmd import find_local
from tests.conftest import raven
from tests.fakes.model_server import FakeModelServer, Reply, openai_stream

pytestmark = pytest.mark.processes  # starts Raven, agent or server processes


async def test_a_local_server_is_found_by_its_models_list(model_server: FakeModelServer) -> None:
    servers = (("llama.cpp", model_server.url + "/v1"), ("nothing", "http://127.0.0.1:9/v1"))
    # The probe's half second is for a person waiting; a loaded machine gets longer.
    (found,) = await find_local(servers, timeout_s=30)
    assert found.base_url == model_server.url + "/v1" and found.model == "fake-model"
    assert found.label.startswith("llama.cpp, running here at ")


def test_setup_writes_a_private_config_with_the_model_and_tests_one_turn(
    env: dict[str, str], home: Path, model_server: FakeModelServer
) -> None:
    model_server.queue(
        Reply(events=openai_stream(text="ready")),
        Reply(events=openai_stream(tool_calls=[("c1", "ping", "{}")])),
        Reply(events=openai_stream(text="hello")),
    )
    base = model_server.url + "/v1"
    # 1 is "an OpenAI-compatible server"; servers found on this machine come after 3. The
    # server's models are listed; an empty answer is asked again, then 1 picks the first.
    answers = f"1\n{base}\n\n1\nSETUP_TEST_KEY\n"
    done = raven("setup", env={**env, "SETUP_TEST_KEY": "k-123"}, input=answers)
    assert done.returncode == 0, done.stderr
    assert "  1. fake-model" in done.stderr
    assert "Give the model's name, as the server knows it." in done.stderr
    assert "The model answered: ready" in done.stdout
    assert "did not call a tool" not in done.stderr
    assert [t["function"]["name"] for t in model_server.requests[1].body["tools"]] == ["ping"]
    config_file = home / "config.json"
    assert stat.S_IMODE(config_file.stat().st_mode) == 0o600
    config = json.loads(config_file.read_text())
    assert config["defaultModel"] == "fake-model"  # named after the model, not "setup"
    (model,) = [m for m in config["models"] if m["id"] == "fake-model"]
    assert model == {
        "id": "fake-model",
        "name": "fake-model",
        "provider": "openai",
        "model": "fake-model",
        "baseUrl": base,
        "apiKeyEnv": "SETUP_TEST_KEY",
    }
    assert "k-123" not in config_file.read_text()
    assert model_server.requests[0].headers["Authorization"] == "Bearer k-123"
    ran = raven("run", "hi", env={**env, "SETUP_TEST_KEY": "k-123"})
    assert ran.returncode == 0 and ran.stdout == "hello \n"  # the next command uses it


def test_setup_says_so_when_the_model_does_not_answer(
    env: dict[str, str], home: Path, model_server: FakeModelServer
) -> None:
    model_server.queue(Reply(status=401, body='{"error": {"message": "bad key"}}'))
    done = raven("setup", env=env, input=f"1\n{model_server.url}/v1\nm\n\n")
    assert done.returncode == 1
    assert "did not answer" in done.stderr and "run `raven setup` again" in done.stderr
    assert (home / "config.json").exists()


def test_setup_says_once_how_to_fix_a_server_that_never_calls_tools(
    env: dict[str, str], home: Path, model_server: FakeModelServer
) -> None:
    model_server.queue(
        Reply(events=openai_stream(text="ready")),
        Reply(events=openai_stream(text="pong, I think")),  # llama-cpp-python's default
    )
    done = raven("setup", env=env, input=f"1\n{model_server.url}/v1\nm\n\n")
    assert done.returncode == 0, done.stderr  # it still answers: a warning, not a failure
    assert done.stderr.count("did not call a tool when asked to") == 1
    assert "--chat_format chatml-function-calling" in done.stderr
    assert "Raven is ready" in done.stdout
