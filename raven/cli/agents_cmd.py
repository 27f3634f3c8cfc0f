"""`raven agents list | run | branches | merge | discard`: the configured sub-agents, probed
and driven by hand, and the branches they leave under worktree isolation."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from raven.cli import complete
from raven.cli.help import Typer
from raven.cli.options import ConfigOption

if TYPE_CHECKING:
    from raven.config import AgentSpec
    from raven.sandbox import Sandbox

app = Typer(help="List and try the sub-agents Raven drives.", no_args_is_help=True)

TRUST_NOTE = (
    "Sub-agents run unattended with your rights: under `auto` their edits and commands "
    "are approved without asking."
)
EXIT_FAILED = 1
EXIT_STOPPED_SHORT = 3
EXIT_CANCELLED = 130


@app.command("list")
def list_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    config: ConfigOption = None,
) -> None:
    """Each configured agent with its status: ACP agents answer initialize, CLI ones exist."""
    import asyncio
    import json

    from raven.cli.options import load
    from raven.sandbox import Sandbox

    cfg, paths = load(config, "cli")
    rows = asyncio.run(_probe_all(cfg.agents, Sandbox.of(cfg, paths)))
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        typer.echo("no sub-agents are configured (add them under agents)")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("agent", "protocol", "permissions", "mode", "status", "reports", box=None)
    for row in rows:
        reports = " ".join(x for x in (row.get("agentName"), row.get("agentVersion")) if x)
        mode = row.get("mode") or "-"
        table.add_row(
            row["name"], row["protocol"], row["permissions"], mode, row["status"], reports
        )
    console = Console(markup=False, highlight=False)  # names and reports are text
    console.print(table)
    console.print(TRUST_NOTE, style="dim")


async def _probe_all(agents: list[AgentSpec], jail: Sandbox) -> list[dict[str, Any]]:
    import asyncio

    return list(await asyncio.gather(*(_probe(a, jail) for a in agents)))


async def _probe(spec: AgentSpec, jail: Sandbox) -> dict[str, Any]:
    import shutil

    from raven.acp_client import SubAgent, SubAgentError

    row: dict[str, Any] = {
        "name": spec.name,
        "description": spec.description,
        "protocol": spec.protocol,
        "permissions": spec.permissions,
        "enabled": spec.enabled,
    }
    if not spec.enabled:
        return {**row, "status": "disabled"}
    if shutil.which(spec.command) is None:
        return {**row, "status": f"command not found: {spec.command}"}
    if spec.protocol == "cli":
        return {**row, "status": "ready"}
    if spec.over_a2a:
        return {**row, **await _probe_a2a(spec)}
    agent = SubAgent(spec, Path.cwd(), jail.required_at(spec.sandbox))
    try:
        info = await agent.start()  # a session: its modes say which one Raven keeps it in
    except SubAgentError as exc:
        return {**row, "status": f"failed: {exc}"}
    finally:
        await agent.stop()
    return {
        **row,
        "status": "ready",
        "mode": agent.mode,
        "agentName": info.name,
        "agentVersion": info.version,
        "capabilities": info.capabilities,
    }


async def _probe_a2a(spec: AgentSpec) -> dict[str, Any]:
    """An A2A agent over stdio started, greeted and asked for its card."""
    from raven.a2a_client.send import PeerError
    from raven.a2a_client.stdio import StdioAgent

    try:
        agent = await StdioAgent.start(spec, Path.cwd(), 1024 * 1024)
    except PeerError as exc:
        return {"status": f"failed: {exc}"}
    try:
        card = (await agent.call("GetExtendedAgentCard", {}, spec.ready_timeout_s)).get("result")
    except PeerError as exc:
        return {"status": f"failed: {exc}"}
    finally:
        await agent.stop()
    if not isinstance(card, dict):
        return {"status": "failed: it answered no agent card"}
    return {"status": "ready", "agentName": card.get("name"), "agentVersion": card.get("version")}


@app.command("run")
def run_command(
    name: Annotated[
        str, typer.Argument(help="Agent name from agents.", autocompletion=complete.agent_names)
    ],
    prompt: Annotated[str, typer.Argument(help="The task.")],
    cwd: Annotated[Path | None, typer.Option("--cwd", help="Working directory.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    config: ConfigOption = None,
) -> int:
    """Give one task to one agent, as `delegate` would; its answer, then the decisions taken."""
    import asyncio
    import json
    import signal

    from raven.acp_client import AgentsSource, SubAgentError
    from raven.cli.options import load, workdir
    from raven.config import ConfigError
    from raven.sandbox import Sandbox
    from raven.signals import STOP_SIGNALS, StopSignals
    from raven.tools import Progress, ToolContext, ToolError

    cfg, paths = load(config, "cli")
    if any(a.name == name and a.over_a2a for a in cfg.agents if a.enabled):
        raise ConfigError(
            f"{name} is an A2A agent over stdio, not one to delegate to: "
            f'ask it with `raven a2a send {name} "…"`'
        )
    if not any(a.name == name for a in cfg.agents if a.enabled):
        known = ", ".join(a.name for a in cfg.agents if a.enabled) or "none configured"
        raise ConfigError(f"no enabled sub-agent {name!r} (agents: {known})")
    where = workdir(cwd)

    def progress(update: Progress) -> None:
        if update.text and not as_json:
            typer.echo(update.text, err=True)

    async def main() -> int:
        source = AgentsSource(cfg.agents)
        approve, ask = _terminal_asking(cfg.limits.question_timeout_s)
        ctx = ToolContext(
            cwd=where,
            limits=cfg.limits,
            ask=ask,
            session_id="cli",
            progress=progress,
            approve=approve,
            sandbox=Sandbox.of(cfg, paths),
        )
        work = asyncio.ensure_future(source.delegate(ctx, name, prompt))
        stops = StopSignals(lambda _: work.cancel(), (signal.SIGINT, *STOP_SIGNALS))
        try:
            with stops:
                outcome = await work
        except asyncio.CancelledError:
            typer.echo("cancelled", err=True)
            if stops.received in (None, signal.SIGINT):
                return EXIT_CANCELLED
            return stops.exit_code or EXIT_CANCELLED
        except (ToolError, SubAgentError) as exc:
            typer.echo(f"raven: {exc}", err=True)
            return EXIT_FAILED
        finally:
            await source.aclose()
        if as_json:
            body = {
                "agent": name,
                "answer": outcome.answer,
                "stopReason": outcome.stop_reason,
                "decisions": outcome.decisions,
            }
            typer.echo(json.dumps(body, indent=2))
        else:
            typer.echo(outcome.answer)
            for decision in outcome.decisions:
                typer.echo(f"decision: {decision}", err=True)
        return 0 if outcome.stop_reason == "end_turn" else EXIT_STOPPED_SHORT

    return asyncio.run(main())


@app.command("branches")
def branches_command(
    cwd: Annotated[Path | None, typer.Option("--cwd", help="In this repository.")] = None,
) -> None:
    """The branches sub-agents left (worktree isolation), each with what it changed."""
    import asyncio

    from raven.acp_client.worktree import BRANCH_PREFIX, changes_of, git
    from raven.cli.options import workdir

    async def main() -> list[str]:
        repo = workdir(cwd)
        listed = await git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/raven/")
        lines = []
        for branch in listed.splitlines():
            base = await git(repo, "merge-base", "HEAD", branch)
            changes = await changes_of(repo, base, branch)
            added = sum(c.added or 0 for c in changes)
            removed = sum(c.removed or 0 for c in changes)
            lines.append(f"{branch}  {len(changes)} files  +{added} -{removed}")
        return lines or [f"no {BRANCH_PREFIX}* branches"]

    for line in _git_or_exit(lambda: asyncio.run(main())):
        typer.echo(line)


@app.command("merge")
def merge_command(
    branch: Annotated[str, typer.Argument(help="A raven/… branch a sub-agent left.")],
    cwd: Annotated[Path | None, typer.Option("--cwd", help="In this repository.")] = None,
) -> None:
    """Merge a sub-agent's branch into the current one (a merge commit), then delete it."""
    import asyncio

    from raven.acp_client.worktree import git, require_identity
    from raven.cli.options import workdir

    async def main() -> str:
        repo = workdir(cwd)
        await require_identity(repo)
        await git(repo, "merge", "--no-ff", "--no-edit", _ours(branch))
        await git(repo, "branch", "--quiet", "-d", branch)
        return f"merged {branch}"

    typer.echo(_git_or_exit(lambda: asyncio.run(main())))


@app.command("discard")
def discard_command(
    branch: Annotated[str, typer.Argument(help="A raven/… branch a sub-agent left.")],
    cwd: Annotated[Path | None, typer.Option("--cwd", help="In this repository.")] = None,
) -> None:
    """Delete a sub-agent's branch and the changes on it."""
    import asyncio

    from raven.acp_client.worktree import git
    from raven.cli.options import workdir

    async def main() -> str:
        await git(workdir(cwd), "branch", "--quiet", "-D", _ours(branch))
        return f"discarded {branch}"

    typer.echo(_git_or_exit(lambda: asyncio.run(main())))


def _ours(branch: str) -> str:
    """`branch`, when it is one a sub-agent left; else exit 2 saying so."""
    from raven.acp_client.worktree import BRANCH_PREFIX

    if not branch.startswith(BRANCH_PREFIX) or branch.startswith("-"):
        typer.echo(f"raven: {branch} is not a sub-agent's branch ({BRANCH_PREFIX}…)", err=True)
        raise typer.Exit(2)
    return branch


def _git_or_exit(run: Any) -> Any:
    """`run()`; a git failure is printed and exits 1."""
    from raven.acp_client.worktree import WorktreeError

    try:
        return run()
    except WorktreeError as exc:
        typer.echo(f"raven: {exc}", err=True)
        raise typer.Exit(1) from None


def _terminal_asking(timeout_s: float) -> tuple[Any, Any]:
    """What the agent's escalations (`ask`, a rule's `escalate`) and questions reach: the
    person at this terminal, within `timeout_s`; without a terminal, nobody (a request
    escalated is then rejected)."""
    import asyncio

    from rich.console import Console

    from raven.engine import approval_of
    from raven.terminal.asker import TerminalAsker
    from raven.terminal.reader import LineReader, stdin_is_terminal
    from raven.terminal.view import TerminalView
    from raven.tools import ALL_DECISIONS, Decision, Permission, Question

    if not stdin_is_terminal():
        return _nobody, _nobody
    err = Console(stderr=True)
    asker = TerminalAsker(err, LineReader(), TerminalView(Console(), err, False), True)

    async def approve(permission: Permission) -> Decision | None:
        try:
            async with asyncio.timeout(timeout_s):
                verdict = await asker.approve(approval_of("cli", permission))
        except TimeoutError:
            return None
        return verdict if verdict in ALL_DECISIONS else None  # type: ignore[return-value]

    async def ask(question: Question) -> str | None:
        try:
            async with asyncio.timeout(timeout_s):
                return await asker.ask(question)
        except TimeoutError:
            return None

    return approve, ask


async def _nobody(asked: object) -> None:
    return None
