"""How the ACP face asks its editor: permission requests and form elicitation.

Cancelled outcomes, errors, timeouts and a closed connection all mean "no":
an approval is rejected, a question gets no answer. Never raises at the engine.
"""

from __future__ import annotations

import logging
from typing import Any

from raven.acp import protocol as p
from raven.acp.protocol import ELICITATION_CREATE, REQUEST_PERMISSION, ClientCapabilities
from raven.engine import (
    DECISION_LABELS,
    ApprovalRequest,
    Decision,
    FileDiff,
    Question,
    Unanswered,
)
from raven.jsonrpc import Connection, ConnectionClosed, RpcError

log = logging.getLogger(__name__)

PERMISSION_OPTIONS: list[p.PermissionOption] = [
    {"optionId": decision, "name": label, "kind": decision}
    for decision, label in DECISION_LABELS.items()
]
_DECISIONS: dict[str, Decision] = {o["optionId"]: o["kind"] for o in PERMISSION_OPTIONS}
SKIP_OPTION = "skip"
CANCELLED = "$cancelled"
"""Stands for the editor's `cancelled` outcome; never a valid option id (they are Raven's)."""


class AcpAsker:
    def __init__(
        self,
        connection: Connection,
        session_id: str,
        capabilities: ClientCapabilities,
        timeout_s: float,
    ) -> None:
        self._connection = connection
        self._session_id = session_id
        self._capabilities = capabilities
        self._timeout_s = timeout_s

    async def approve(self, request: ApprovalRequest) -> Decision | Unanswered:
        tool_call = p.tool_call(
            request.call_id, request.title, request.kind, request.raw_input, request.locations
        )
        if isinstance(request.preview, FileDiff):  # the change or the command, to judge by
            diff = request.preview
            tool_call["content"] = [p.diff_content(diff.path, diff.old_text, diff.new_text)]
        elif request.preview is not None:
            tool_call["content"] = [p.text_content(request.preview)]
        options = [o for o in PERMISSION_OPTIONS if o["kind"] in request.offered]
        outcome = await self._permission(tool_call, options)
        if outcome is None or outcome == CANCELLED:
            return "unanswered" if outcome is None else "cancelled"
        return _DECISIONS.get(outcome, "reject_once")

    async def ask(self, question: Question) -> str | None:
        elicitation = self._capabilities.elicitation
        if elicitation is not None and elicitation.form is not None:
            return await self._elicit(question)
        if not question.choices:
            return None
        # No choice is an allow option: a client that approves on its own (`--approve-all`,
        # "the first allow", "the first option") would answer the question for the person.
        # Skip comes first, and every option is a reject kind no auto-approver picks.
        options: list[p.PermissionOption] = [
            {"optionId": SKIP_OPTION, "name": "Skip", "kind": "reject_once"}
        ]
        options += [
            {"optionId": f"choice_{i}", "name": choice, "kind": "reject_once"}
            for i, choice in enumerate(question.choices)
        ]
        chosen = await self._permission(p.tool_call(question.call_id, question.text), options)
        if chosen is None or not chosen.startswith("choice_"):
            return None
        index = int(chosen.removeprefix("choice_"))
        return question.choices[index] if index < len(question.choices) else None

    async def _permission(
        self, tool_call: p.ToolCallFields, options: list[p.PermissionOption]
    ) -> str | None:
        """The option chosen, `CANCELLED` when the editor cancelled the request, or None when
        no valid answer came."""
        params = {"sessionId": self._session_id, "toolCall": tool_call, "options": options}
        result = p.read(p.RequestPermissionResult, await self._request(REQUEST_PERMISSION, params))
        if result is None:
            return None
        if not isinstance(result.outcome, p.SelectedOutcome):
            return CANCELLED
        chosen = result.outcome.option_id
        return chosen if any(o["optionId"] == chosen for o in options) else None

    async def _elicit(self, question: Question) -> str | None:
        answer: dict[str, Any] = {"type": "string", "title": "Answer"}
        if question.choices:
            answer["oneOf"] = [{"const": c, "title": c} for c in question.choices]
        params: dict[str, Any] = {
            "sessionId": self._session_id,
            "mode": "form",
            "message": question.text,
            "requestedSchema": {
                "type": "object",
                "properties": {"answer": answer},
                "required": ["answer"],
            },
        }
        if question.call_id:
            params["toolCallId"] = question.call_id
        result = p.read(p.ElicitationResult, await self._request(ELICITATION_CREATE, params))
        if result is None or result.action != "accept" or result.content is None:
            return None
        value = result.content.get("answer")
        return str(value) if value not in (None, "") else None

    async def _request(self, method: str, params: dict[str, Any]) -> Any:
        try:
            return await self._connection.request(method, params, self._timeout_s)
        except TimeoutError:
            log.warning("%s got no answer in %.0fs", method, self._timeout_s)
        except RpcError as exc:
            log.warning("%s failed: %s (%s)", method, exc.message, exc.code)
        except ConnectionClosed:
            log.info("%s: the editor closed the connection", method)
        return None
