"""`raven a2a enable | disable | status | card | serve | stdio | send`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from raven.cli.help import Typer
from raven.cli.options import ConfigOption

if TYPE_CHECKING:
    from raven.a2a_client.send import PeerReply

app = Typer(help="Serve Raven to remote agents over A2A.", no_args_is_help=True)


AgentOption = Annotated[
    list[str] | None,
    typer.Option(
        "--agent",
        help="Serve this configured agent instead of Raven (repeat it for several).",
    ),
]


@app.command("enable")
def enable_command(config: ConfigOption = None) -> None:
    """Enable the A2A routes on the gateway; mints a token when none is set."""
    import secrets

    from raven.cli.options import load
    from raven.config import resolve_paths, save_config, starter_config
    from raven.config.store import config_lock

    with config_lock(resolve_paths(config).config_file):
        cfg, paths = load(config, "cli", creates=True)
        if not paths.config_file.exists():
            cfg = starter_config()
        server = cfg.a2a.server
        minted = "" if server.token else secrets.token_urlsafe(32)
        server = server.model_copy(update={"enabled": True, "token": server.token or minted})
        save_config(
            cfg.model_copy(update={"a2a": cfg.a2a.model_copy(update={"server": server})}),
            paths.config_file,
        )
    typer.echo(f"A2A enabled in {paths.config_file}")
    if not cfg.models:
        from raven.config.store import NO_MODEL_HINT

        typer.echo(f"raven: peers cannot be answered yet: {NO_MODEL_HINT}", err=True)
    if minted:
        typer.echo(f"bearer token (shown once; give it to the peers you trust): {minted}")
    _tell_gateway(paths.data_dir)


@app.command("disable")
def disable_command(config: ConfigOption = None) -> None:
    """Disable the A2A routes on the gateway; the token is kept."""
    from raven.cli.options import load
    from raven.config import resolve_paths, save_config
    from raven.config.store import config_lock

    with config_lock(resolve_paths(config).config_file):
        cfg, paths = load(config, "cli")
        server = cfg.a2a.server.model_copy(update={"enabled": False})
        save_config(
            cfg.model_copy(update={"a2a": cfg.a2a.model_copy(update={"server": server})}),
            paths.config_file,
        )
    typer.echo("A2A disabled (token kept).")
    _tell_gateway(paths.data_dir)


def _tell_gateway(data_dir: Path) -> None:
    from raven.gateway.serve import running_url

    url = running_url(data_dir)
    if url:
        typer.echo(f"The gateway running at {url} must be restarted for this to take effect.")
    else:
        typer.echo("No gateway is running; the next `raven gateway` serves it as configured.")


@app.command("status")
def status_command(
    show_token: Annotated[bool, typer.Option("--show-token", help="Print the token.")] = False,
    config: ConfigOption = None,
) -> None:
    """Show whether A2A is enabled and how it is served (never the token, unless asked)."""
    from raven.cli.options import load
    from raven.running import A2A_SERVE, GATEWAY, running

    cfg, paths = load(config, "cli")
    s = cfg.a2a.server
    token = (s.token or "(not set)") if show_token else ("set" if s.token else "not set")
    typer.echo(f"enabled:    {'yes' if s.enabled else 'no'}")
    typer.echo(f"token:      {token}")
    typer.echo(f"path:       {s.path}")
    grpc = f", gRPC on port {s.grpc_port}" if s.grpc_port is not None else ""
    typer.echo(f"bindings:   JSON-RPC at {s.path}, HTTP+JSON under {s.path.rstrip('/')}/{grpc}")
    served = []
    if (alone := running(paths.data_dir / A2A_SERVE)) is not None:
        grpc_at = f", gRPC at {alone['grpc']}" if alone.get("grpc") else ""
        served.append(f"{alone['url']}{grpc_at} (raven a2a serve, pid {alone['pid']})")
    gateway = running(paths.data_dir / GATEWAY)
    if gateway is not None and gateway.get("a2a"):
        served.append(f"{gateway['a2a']} (the gateway, pid {gateway['pid']})")
    if not served:
        served.append(f"no (`raven a2a serve` would listen on {s.host}:{s.port})")
    for number, line in enumerate(served):
        typer.echo(f"{'running:' if number == 0 else '':12}{line}")
    if s.agents:
        agents = ", ".join(f"{name} at {s.agent_path(name)}" for name in s.agents)
        typer.echo(f"agents:     {agents} (beside Raven)")
    typer.echo(f"task store: {s.task_store}")
    allowed = ", ".join(s.push.allow_private) or "none"
    typer.echo(f"push:       public addresses; private ones allowed: {allowed}")
    typer.echo(f"approvals:  {s.approvals}")


@app.command("card")
def card_command(
    extended: Annotated[bool, typer.Option("--extended", help="The authenticated card.")] = False,
    config: ConfigOption = None,
) -> None:
    """Print the agent card that would be served."""
    import json

    from a2a.server.request_handlers.response_helpers import agent_card_to_dict

    from raven.a2a.card import agent_card, extended_card
    from raven.a2a.parts import input_modes
    from raven.cli.options import load
    from raven.origins import is_loopback
    from raven.sandbox import Sandbox

    cfg, _ = load(config, "cli")
    s = cfg.a2a.server
    roster = cfg.roster()
    host = "localhost" if is_loopback(s.host) else s.host
    url = f"{s.public_url or f'http://{host}:{s.port}'}{s.path}"
    card = agent_card(url, roster, input_modes(s), sandbox=Sandbox(cfg.sandbox).stated)
    if extended:
        card = extended_card(card, roster)
    typer.echo(json.dumps(agent_card_to_dict(card), indent=2))


@app.command("serve")
def serve_command(
    host: Annotated[str | None, typer.Option("--host", help="Address to listen on.")] = None,
    port: Annotated[int | None, typer.Option("--port", help="Port (0 picks a free one).")] = None,
    allow_remote: Annotated[
        bool, typer.Option("--allow-remote", help="Allow a non-loopback address.")
    ] = False,
    agent: AgentOption = None,
    config: ConfigOption = None,
) -> None:
    """Serve A2A on a listener of its own (needs a token; not `enabled`): Raven, with the
    agents of `a2a.server.agents` beside it, or only the agents given with --agent."""
    import asyncio
    import sys

    from raven.cli.options import check_bind, load
    from raven.config import ConfigError, is_subagent
    from raven.providers import pick_model

    if is_subagent():
        from raven.a2a import SubagentRefused

        raise SubagentRefused()
    cfg, paths = load(config, "a2a")
    s = cfg.a2a.server
    if not s.token:
        raise ConfigError("a2a.server.token is empty; run `raven a2a enable` to mint one")
    if not agent:  # No model: refuse to start, rather than fail every task.
        pick_model(cfg, None, config_file=paths.config_file)
    bind_host = host or s.host
    check_bind(bind_host, allow_remote)
    if allow_remote:
        print(
            "raven: warning: the bearer token is shared operator access to this machine; "
            "serve it only behind TLS to peers you trust",
            file=sys.stderr,
        )

    async def main() -> None:
        from raven.a2a import build_mounts
        from raven.a2a.serve import serve
        from raven.compose import build_runtime, served_agents

        agents = served_agents(cfg, paths, agent or s.agents)
        runtime = build_runtime(cfg, paths, face="a2a")
        try:
            mounts = build_mounts(runtime, s, agents, own=not agent)

            def announce(card_url: str, rpc_url: str) -> None:
                print(f"card: {card_url}", flush=True)
                print(f"rpc:  {rpc_url}", flush=True)

            from raven.running import A2A_SERVE

            state = paths.data_dir / A2A_SERVE
            await serve(mounts, bind_host, s.port if port is None else port, announce, state)
        finally:
            await runtime.aclose()

    asyncio.run(main())


@app.command("stdio")
def stdio_command(
    agent: Annotated[
        str | None,
        typer.Option("--agent", help="Serve this configured agent instead of Raven."),
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Serve A2A to the process that started Raven, on stdin and stdout: no port, no token
    (a sub-agent may: nothing listens)."""
    import asyncio

    from raven.jsonrpc.stdio import reserve_stdout

    frames_fd = reserve_stdout()  # before anything can print: stdout carries frames only
    from raven.cli.options import load
    from raven.providers import pick_model

    cfg, paths = load(config, "a2a")
    if agent is None:
        pick_model(cfg, None, config_file=paths.config_file)

    async def main() -> int:
        from raven.a2a import build_mounts
        from raven.a2a.stdio import serve_stdio
        from raven.compose import build_runtime, served_agents

        agents = served_agents(cfg, paths, [agent] if agent else [])
        runtime = build_runtime(cfg, paths, face="a2a")
        try:
            (mount,) = build_mounts(runtime, cfg.a2a.server, agents, not agents, listens=False)
            return await serve_stdio(mount, frames_fd)
        finally:
            await runtime.aclose()

    raise typer.Exit(asyncio.run(main()))


EXIT_INPUT_REQUIRED = 4


@app.command("send")
def send_command(
    card_url: Annotated[
        str,
        typer.Argument(
            help="The peer's agent card URL, or the name of an agent with protocol a2a-stdio."
        ),
    ],
    message: Annotated[str, typer.Argument(help="What to ask the peer.")],
    task_id: Annotated[str | None, typer.Option("--task-id", help="Answer this task.")] = None,
    context_id: Annotated[
        str | None, typer.Option("--context-id", help="Continue this conversation.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw reply.")] = False,
    files: Annotated[
        list[Path] | None, typer.Option("--file", help="Send this file along (repeatable).")
    ] = None,
    config: ConfigOption = None,
) -> None:
    """Ask an A2A agent, remote or started here over stdio; its text on stdout (exit 4 when
    it needs input).

    Files in the reply are saved under ./a2a-inbox/<peer host or agent name>/. An agent
    started here runs for this one call.
    """
    import asyncio
    import json

    from raven.a2a_client.send import PeerError, send_message
    from raven.cli.options import load

    cfg, _ = load(config, "cli")
    inbox = Path.cwd() / "a2a-inbox"
    spec = next((a for a in cfg.agents if a.enabled and a.over_a2a and a.name == card_url), None)

    async def ask_local(cwd: Path) -> PeerReply:
        from raven.a2a_client.stdio import StdioAgents

        agents = StdioAgents([spec] if spec else [], cfg.a2a.client)
        try:
            return await agents.send(
                "cli", card_url, cwd, message, task_id, context_id, files or [], inbox
            )
        finally:
            await agents.aclose()

    try:
        if spec is not None:
            where = Path(spec.cwd).expanduser().resolve() if spec.cwd else Path.cwd()
            reply = asyncio.run(ask_local(where))
        else:
            reply = asyncio.run(
                send_message(
                    card_url,
                    message,
                    cfg.a2a.peers,
                    cfg.a2a.client,
                    task_id,
                    context_id,
                    files=files or [],
                    inbox=inbox,
                )
            )
    except PeerError as exc:
        typer.echo(f"raven: {exc}", err=True)
        raise typer.Exit(1) from None
    typer.echo(json.dumps(reply.raw, indent=2) if as_json else reply.text)
    for line in reply.received:
        typer.echo(line, err=True)
    if reply.state in ("input-required", "auth-required"):
        typer.echo(
            f"(the peer needs input: answer with --task-id {reply.task_id} "
            f"--context-id {reply.context_id})",
            err=True,
        )
        raise typer.Exit(EXIT_INPUT_REQUIRED)
