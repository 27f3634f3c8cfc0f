"""The ask_user tool: a question for the person, with optional choices."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from raven.tools.base import Args, BuiltinTool, Question, ToolContext, ToolOutput

NO_ANSWER = "no answer available"


class AskUserArgs(Args):
    question: str = Field(min_length=1, description="The question, in one or two sentences")
    choices: list[str] = Field(
        default_factory=list, description="Possible answers; leave empty for free text"
    )


class AskUser(BuiltinTool):
    name: ClassVar[str] = "ask_user"
    description: ClassVar[str] = (
        "Ask the user a question and wait for the answer. Use only when you cannot proceed "
        "without their decision."
    )
    kind = "other"
    needs_approval = False
    args_model = AskUserArgs

    def title(self, args: AskUserArgs, ctx: ToolContext) -> str:
        return f"Ask: {args.question}"

    async def run(self, args: AskUserArgs, ctx: ToolContext) -> ToolOutput:
        answer = await ctx.ask(Question(text=args.question, choices=tuple(args.choices)))
        if answer is None:
            return ToolOutput(NO_ANSWER, is_error=True)
        return ToolOutput(answer)
