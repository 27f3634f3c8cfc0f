"""How the ACP face asks its editor: permission requests and form elicitation.

Cancelled outcomes, errors, timeouts and a closed connection all mean "no":
an approval is rejected, a question gets no answer. Never raises at the engine.
"""

from __future__ import annotations

import logging
from typing import Any

from raven.acp.protocol import ELICITATION_CREATE, REQUEST_PERMISSION, ClientCapabilities
from raven.engine import ApprovalRequest, Decision, Question
from raven.jsonrpc import Connection, ConnectionClosed, RpcError

log = logging.getLogger(__name__)

PERMISSION_OPTIONS: list[dict[str, str]] = [
    {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
    {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
    {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"},
]
_DECISIONS: dict[str, Decision] = {
    "allow_once": "allow_once",
    "allow_always": "allow_always",
    "reject_once": "reject_once",
    "reject_always": "reject_always",
}
SKIP_OPTION = "skip"


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

    async def approve(self, request: ApprovalRequest) -> Decision:
        tool_call: dict[str, Any] = {
            "toolCallId": request.call_id,
            "title": request.title,
            "kind": request.kind,
            "status": "pending",
            "rawInput": request.raw_input,
        }
        if request.locations:
            tool_call["locations"] = [{"path": str(p)} for p in request.locations]
        options = [o for o in PERMISSION_OPTIONS if o["kind"] in request.offered]
        outcome = await self._permission(tool_call, options)
        return _DECISIONS.get(outcome or "", "reject_once")

    async def ask(self, question: Question) -> str | None:
        elicitation = self._capabilities.elicitation
        if elicitation is not None and elicitation.form is not None:
            return await self._elicit(question)
        if not question.choices:
            return None
        options = [
            {"optionId": f"choice_{i}", "name": choice, "kind": "allow_once"}
            for i, choice in enumerate(question.choices)
        ]
        options.append({"optionId": SKIP_OPTION, "name": "Skip", "kind": "reject_once"})
        tool_call = {"toolCallId": question.call_id, "title": question.text}
        chosen = await self._permission(tool_call, options)
        if chosen is None or not chosen.startswith("choice_"):
            return None
        index = int(chosen.removeprefix("choice_"))
        return question.choices[index] if index < len(question.choices) else None

    async def _permission(
        self, tool_call: dict[str, Any], options: list[dict[str, str]]
    ) -> str | None:
        params = {"sessionId": self._session_id, "toolCall": tool_call, "options": options}
        result = await self._request(REQUEST_PERMISSION, params)
        outcome = result.get("outcome") if isinstance(result, dict) else None
        if isinstance(outcome, dict) and outcome.get("outcome") == "selected":
            option = outcome.get("optionId")
            if isinstance(option, str) and any(o["optionId"] == option for o in options):
                return option
        return None

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
        result = await self._request(ELICITATION_CREATE, params)
        if not isinstance(result, dict) or result.get("action") != "accept":
            return None
        content = result.get("content")
        value = content.get("answer") if isinstance(content, dict) else None
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
