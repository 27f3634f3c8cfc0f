"""The update_plan tool: the model keeps a visible checklist of its steps."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from raven.tools.base import Args, BuiltinTool, PlanStep, ToolContext, ToolOutput


class PlanEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: str = Field(min_length=1, description="What this step does")
    status: Literal["pending", "in_progress", "completed"] = "pending"
    priority: Literal["high", "medium", "low"] = "medium"


class UpdatePlanArgs(Args):
    entries: list[PlanEntry] = Field(description="The whole plan, in order; replaces the last one")


class UpdatePlan(BuiltinTool):
    name: ClassVar[str] = "update_plan"
    description: ClassVar[str] = (
        "Show the user your plan for a multi-step task as a checklist. Send the whole list "
        "each time; mark steps in_progress and completed as you go."
    )
    kind = "other"
    needs_approval = False
    args_model = UpdatePlanArgs

    def title(self, args: UpdatePlanArgs, ctx: ToolContext) -> str:
        return "Update plan"

    async def run(self, args: UpdatePlanArgs, ctx: ToolContext) -> ToolOutput:
        steps = tuple(PlanStep(e.content, e.status, e.priority) for e in args.entries)
        done = sum(s.status == "completed" for s in steps)
        return ToolOutput(f"Plan updated: {done}/{len(steps)} steps completed.", plan=steps)
