"""Built-in tools and the registry that offers them to a turn.

A tool validates its arguments, does one job relative to the session's cwd and
returns text for the model. Tools never talk to a face directly: questions,
approvals and progress go through the callables in their context.
"""

from raven.tools.base import (
    ALL_DECISIONS,
    DECISION_LABELS,
    Capped,
    ChildPlan,
    ChildPlanStep,
    ChildProgress,
    ChildSubagent,
    ChildText,
    ChildToolCall,
    Decision,
    FileDiff,
    Parts,
    Permission,
    PlanStep,
    Preview,
    Progress,
    Question,
    Tool,
    ToolContext,
    ToolError,
    ToolKind,
    ToolOutput,
    ToolSource,
    clip,
    preview_lines,
)
from raven.tools.registry import builtin_tools

__all__ = [
    "ALL_DECISIONS",
    "DECISION_LABELS",
    "Capped",
    "ChildPlan",
    "ChildPlanStep",
    "ChildProgress",
    "ChildSubagent",
    "ChildText",
    "ChildToolCall",
    "Decision",
    "FileDiff",
    "Parts",
    "Permission",
    "PlanStep",
    "Preview",
    "Progress",
    "Question",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolKind",
    "ToolOutput",
    "ToolSource",
    "builtin_tools",
    "clip",
    "preview_lines",
]
