"""`raven setup`: a first run that picks a model, writes it to the config (0600) and tests it.

It offers the local servers it finds listening on loopback (Ollama, llama.cpp, LM
Studio, vLLM), any OpenAI-compatible server by its base URL, OpenAI and Anthropic.
Keys are never written: the config names the environment variable that holds
one. Under `raven acp` this is the "setup" authentication method editors show.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import typer

from raven.cli.options import ConfigOption

LOCAL_SERVERS = (
    ("Ollama", "http://127.0.0.1:11434/v1"),
    ("llama.cpp", "http://127.0.0.1:8080/v1"),
    ("LM Studio", "http://127.0.0.1:1234/v1"),
    ("vLLM", "http://127.0.0.1:8000/v1"),
)
PROBE_TIMEOUT_S = 0.5
"""How long a server on this machine gets to answer the search for local servers."""
LIST_TIMEOUT_S = 5.0
"""How long a server given by its URL gets to list its models."""
TEST_PROMPT = "Reply with the single word: ready"
TOOL_PROMPT = "Call the tool `ping` now."
NO_TOOLS_WARNING = (
    "raven: warning: the model did not call a tool when asked to, so it cannot read files, "
    "edit or run commands (it still answers). Some servers ignore tools unless told to use "
    "them: llama-cpp-python needs `--chat_format chatml-function-calling` (or a model with "
    "a tool-calling template); Ollama and llama.cpp need a model whose template supports "
    "tools (llama.cpp: `--jinja`). Pick such a model and run `raven setup` again."
)


@dataclass(frozen=True)
class Choice:
    label: str
    provider: str
    base_url: str | None = None
    model: str | None = None
    key_env: str | None = None
    models: tuple[str, ...] = ()
    """What the server lists (`GET /models`), to pick from."""


async def list_models(base: str, timeout_s: float = PROBE_TIMEOUT_S) -> tuple[str, ...]:
    """The model ids an OpenAI-compatible server at `base` lists; none when it lists none
    or cannot be reached."""
    import httpx

    async with httpx.AsyncClient(timeout=timeout_s, follow_redirects=False) as client:
        try:
            answer = await client.get(f"{base}/models")
            listed = (answer.json().get("data") or []) if answer.status_code == 200 else []
            return tuple(str(m["id"]) for m in listed)
        except (httpx.HTTPError, ValueError, KeyError, TypeError, AttributeError):
            return ()


async def find_local(
    servers: tuple[tuple[str, str], ...] = LOCAL_SERVERS, timeout_s: float = PROBE_TIMEOUT_S
) -> list[Choice]:
    """The OpenAI-compatible servers answering `GET /models` on loopback within
    `timeout_s`, with their models."""
    found = await asyncio.gather(*(list_models(base, timeout_s) for _, base in servers))
    return [
        Choice(
            f"{name}, running here at {base} ({models[0]})", "openai", base, models[0], None, models
        )
        for (name, base), models in zip(servers, found, strict=True)
        if models
    ]


def setup_command(config: ConfigOption = None) -> int:
    """Pick a model (a local server it finds, a base URL, OpenAI or Anthropic), write it to
    the config and test one turn."""
    from raven.config import load_config, resolve_paths, save_config, starter_config
    from raven.config.store import config_lock

    paths = resolve_paths(config)
    typer.echo("Looking for model servers on this machine…", err=True)
    choices = [  # the fixed three keep their numbers; servers found on this machine follow
        Choice("An OpenAI-compatible server (you give its base URL)", "openai"),
        Choice("OpenAI", "openai", model="gpt-4.1-mini", key_env="OPENAI_API_KEY"),
        Choice("Anthropic", "anthropic", model="claude-sonnet-4-5", key_env="ANTHROPIC_API_KEY"),
        *asyncio.run(find_local()),
    ]
    for number, choice in enumerate(choices, 1):
        typer.echo(f"  {number}. {choice.label}", err=True)
    while not 1 <= (picked := typer.prompt("Which one", type=int, err=True)) <= len(choices):
        typer.echo(f"Give a number from 1 to {len(choices)}.", err=True)
    choice = choices[picked - 1]
    base_url = choice.base_url
    listed = choice.models
    if choice.provider == "openai" and base_url is None and choice.key_env is None:
        base_url = typer.prompt("Base URL (ending in /v1)", err=True).strip().rstrip("/")
        listed = asyncio.run(list_models(base_url, LIST_TIMEOUT_S))
        if not listed:
            typer.echo("It lists no models (or could not be reached); name one.", err=True)
    model = _pick_model(listed, choice.model)
    key_env = typer.prompt(
        "Environment variable holding the API key (empty for none)",
        default=choice.key_env or "",
        err=True,
    ).strip()
    model_id = _model_id(model)
    spec: dict[str, Any] = {"id": model_id, "name": model, "provider": choice.provider}
    spec |= {"model": model} | ({"baseUrl": base_url} if base_url else {})
    spec |= {"apiKeyEnv": key_env} if key_env else {}

    with config_lock(paths.config_file):
        exists = paths.config_file.exists()
        current = load_config(paths.config_file) if exists else starter_config()
        body = current.model_dump(mode="json", by_alias=True, exclude_none=True)
        kept = [m for m in body.get("models", []) if m.get("id") != model_id]
        body["models"] = [*kept, spec]
        body["defaultModel"] = model_id
        updated = type(current).model_validate(body)
        save_config(updated, paths.config_file)
    typer.echo(f"wrote {paths.config_file} (model {model_id}, the default now)", err=True)
    return _test_turn(updated, paths)


def _pick_model(listed: tuple[str, ...], default: str | None) -> str:
    """The model, by its number in what the server lists or by name; never empty."""
    for number, name in enumerate(listed, 1):
        typer.echo(f"  {number}. {name}", err=True)
    question = "Model (a number or a name)" if listed else "Model"
    while True:
        answer = typer.prompt(question, default=default or "", err=True).strip()
        if answer.isdigit() and 1 <= int(answer) <= len(listed):
            return listed[int(answer) - 1]
        if answer and not answer.isdigit():
            return answer
        typer.echo("Give the model's name, as the server knows it.", err=True)


def _model_id(model: str) -> str:
    """The id the config gives `model`: its name as `-m` takes it (`qwen2.5-coder:7b` is
    `qwen2.5-coder-7b`, `org/name` is `name`)."""
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "-", model.rsplit("/", 1)[-1]).strip("-") or "model"


async def _calls_a_tool(provider: Any) -> bool:
    """Whether the model calls a tool when told to: some servers (llama-cpp-python with its
    default chat format, for one) take the tools and never call them."""
    from raven.messages import user_text
    from raven.providers import ModelRequest, ToolCallReady, ToolSpec

    ping = ToolSpec("ping", "Answers pong. Call it whenever you are asked to.", {"type": "object"})
    request = ModelRequest(
        system="You are being tested. Use the tools you are given.",
        messages=[user_text(TOOL_PROMPT)],
        tools=[ping],
    )
    return any([isinstance(e, ToolCallReady) async for e in provider.stream(request)])


def _test_turn(config: Any, paths: Any) -> int:
    """One short model call with the new default; 0 when it answered."""
    from raven.messages import user_text
    from raven.providers import ModelRequest, ProviderError, TextDelta
    from raven.providers.resolve import create_provider, pick_model

    spec = pick_model(config, None, paths.config_file)
    provider = create_provider(spec, config, paths.config_dir)

    async def ask() -> str:
        request = ModelRequest(system="You are being tested.", messages=[user_text(TEST_PROMPT)])
        return "".join([e.text async for e in provider.stream(request) if isinstance(e, TextDelta)])

    typer.echo("Testing one turn…", err=True)
    try:
        answer = asyncio.run(ask())
    except ProviderError as exc:
        typer.echo(f"raven: the model did not answer: {exc}", err=True)
        typer.echo("The config is written; fix the above and run `raven setup` again.", err=True)
        return 1
    typer.echo(f"The model answered: {answer.strip()[:200]}")
    typer.echo("Testing that it calls tools…", err=True)
    try:
        calls_tools = asyncio.run(_calls_a_tool(provider))
    except ProviderError:
        calls_tools = False
    if not calls_tools:
        typer.echo(NO_TOOLS_WARNING, err=True)
    typer.echo("Raven is ready: `raven chat`, or add Raven to your editor (it runs `raven acp`).")
    return 0
