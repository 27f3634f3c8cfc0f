from __future__ import annotations

from pathlib import Path

from raven.tools import ToolContext
from raven.tools.shell import RunCommand, RunCommandArgs


async def test_runs_in_the_session_cwd_and_reports_exit_code(
    ctx: ToolContext, tmp_path: Path
) -> None:
    out = await RunCommand().run(RunCommandArgs(command="pwd; echo err >&2; exit 3"), ctx)
    assert str(tmp_path) in out.text and "err" in out.text
    assert out.text.endswith("[exit code 3]") and out.is_error


async def test_long_output_keeps_head_and_tail(ctx: ToolContext) -> None:
    out = await RunCommand().run(RunCommandArgs(command="echo FIRST; seq 1 100000; echo LAST"), ctx)
    assert "FIRST" in out.text and "LAST" in out.text
    assert "omitted" in out.text
    assert len(out.text) < 1200


async def test_timeout_kills_the_command(ctx: ToolContext) -> None:
    out = await RunCommand().run(
        RunCommandArgs(command="echo started; sleep 30", timeout_s=0.5), ctx
    )
    assert out.is_error and "timed out after 0.5s" in out.text and "started" in out.text
