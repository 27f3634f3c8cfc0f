"""The turn loop: model call, tool calls, repeat, until the model stops or a limit is hit.

`run_turn` never raises at a face for a failed turn: every failure becomes a
`Notice` plus a `TurnEnded` with a stop reason. Knows no protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import re
import uuid
from collections.abc import Coroutine, Sequence
from datetime import date
from typing import Any

from pydantic import ValidationError

from raven.config.schema import ApprovalPolicy
from raven.engine import compaction
from raven.engine.asker import ApprovalRequest, Asker, Decision, Unanswered, approval_of
from raven.engine.events import (
    PARAGRAPH,
    AgentText,
    AgentThought,
    Answered,
    Asking,
    CompactionUpdated,
    Emit,
    Notice,
    PlanUpdated,
    TitleChanged,
    ToolCallStarted,
    ToolCallUpdated,
    ToolStatus,
    TurnEnded,
    TurnEvent,
    TurnStarted,
    UsageUpdated,
)
from raven.engine.prompt import system_prompt
from raven.engine.session import LiveSession
from raven.engine.stand_in import Relay, Reply, StandIn, StandInFailed
from raven.engine.turn_state import TurnState
from raven.errors import invalid_fields
from raven.messages import (
    NOT_RUN_RESULTS,
    REJECTED_RESULT,
    AssistantMessage,
    Part,
    TextPart,
    TokenUsage,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    shown,
)
from raven.providers import (
    ContextTooLong,
    Finish,
    FinishReason,
    ModelRequest,
    ProviderError,
    StopReason,
    TextDelta,
    ThoughtDelta,
    ToolCallReady,
    ToolSpec,
    Usage,
    chars_tokens,
    estimate_text_tokens,
    estimate_tokens,
    tools_chars,
)
from raven.safe_chunks import SafeChunks
from raven.sessions import StoreUnavailable
from raven.tools import (
    ALL_DECISIONS,
    Permission,
    Preview,
    Progress,
    Question,
    Tool,
    ToolContext,
    ToolError,
    ToolOutput,
    clip,
)

log = logging.getLogger(__name__)

TITLE_CHARS = 60
MAX_PARALLEL_TOOLS = 4
WITHDRAW_S = 5.0
"""How long a face gets to withdraw an asking someone else answered."""
CANCELLED_RESULT = "Cancelled by the user before it finished."


async def run_turn(
    session: LiveSession,
    prompt: Sequence[Part],
    asker: Asker,
    emit: Emit,
    approvals: ApprovalPolicy = "ask",
) -> StopReason:
    """Run one turn of `session` on `prompt`; the last event emitted is always `TurnEnded`.

    Each tool call needing approval is decided by the session's mode (`auto`, `deny`),
    then by `approvals`, the face's own standing policy (A2A's `approvals` setting), then
    by what the session remembers, then by the asker.

    `session.cancel_turn()` (or `Runtime.cancel_turn`, from any face) or cancelling the
    calling task stops the model stream and any running command; the turn then ends
    `cancelled`. Every event goes to the session's log too (with the turn's start), so
    each face following the session sees the turn whichever face runs it. Raises
    `SessionClosed` or `SessionBusy` (before anything else) when the session is closed
    or a turn already runs in it.
    """
    return await start_turn(session, prompt, asker, emit, approvals)


def start_turn(
    session: LiveSession,
    prompt: Sequence[Part],
    asker: Asker,
    emit: Emit,
    approvals: ApprovalPolicy = "ask",
    wait_s: float = 0.0,
) -> asyncio.Task[StopReason]:
    """`run_turn` as a task, for a face that answers before the turn ends: the session is
    taken for the turn before this returns, so `SessionClosed` and `SessionBusy` are raised
    here, and a second turn can never start beside it. A turn another process runs in the
    session raises `SessionBusy` from the task, once `wait_s` passed without it ending."""
    turn = session.reserve()
    turn_asker = _TurnAsker(session, asker, approvals)
    work = _run_reserved(session, turn, prompt, turn_asker, emit, wait_s)
    task = asyncio.create_task(work)
    task.add_done_callback(lambda _: session.free(turn))  # also when cancelled before it began
    return task


async def _run_reserved(
    session: LiveSession,
    turn: TurnState,
    prompt: Sequence[Part],
    asker: _TurnAsker,
    emit: Emit,
    wait_s: float,
) -> StopReason:
    interrupted = False
    logged = _logging(session, emit)
    try:
        await session.claim(turn, wait_s)
        end = TurnEnded("cancelled")
        try:
            end = await _run_claimed(session, prompt, asker, logged)
        except asyncio.CancelledError:
            interrupted = True  # the task itself was cancelled: its end is still told
        finally:
            await session.unclaim(turn, end)
    finally:
        session.free(turn)
    # Told once the session is free again, so whoever hears it may start the next turn.
    await session.told(end)
    emit(end)
    if interrupted:
        raise asyncio.CancelledError
    return end.stop_reason


def _logging(session: LiveSession, emit: Emit) -> Emit:
    """`emit` that appends each event to the session's log first."""

    def both(event: TurnEvent) -> None:
        session.publish(event)
        emit(event)

    return both


async def _run_claimed(
    session: LiveSession, prompt: Sequence[Part], asker: _TurnAsker, emit: Emit
) -> TurnEnded:
    """The turn itself, once the session is this process's; its end, to announce.

    Once the prompt is stored, `session.cancel_turn()` cancels this task's work: the turn
    then ends `cancelled`. Cancelled by anyone else, the task raises.
    """
    session.publish(TurnStarted(tuple(prompt)))
    try:
        session.read_project()
        stop, error = await _turn(session, list(prompt), asker, emit)
    except asyncio.CancelledError:
        if session.work_over():
            return TurnEnded("cancelled")
        raise
    session.work_over()
    return TurnEnded(stop, error=error)


async def _turn(
    session: LiveSession, prompt: list[Part], asker: _TurnAsker, emit: Emit
) -> tuple[StopReason, str | None]:
    try:
        return await _loop(session, prompt, asker, emit), None
    except (ProviderError, StandInFailed) as exc:
        # The face shows the notice; stderr must not get it a second time.
        log.info("model call failed: %s", exc)
        emit(Notice(str(exc)))
        return "end_turn", str(exc)
    except StoreUnavailable as exc:  # a full disk, a damaged file: the person can act on it
        log.warning("turn stopped: %s", exc)
        emit(Notice(str(exc)))
        return "end_turn", str(exc)
    except Exception as exc:
        log.exception("turn failed")
        message = f"The turn failed: {type(exc).__name__}. Details are in the log."
        emit(Notice(message))
        return "end_turn", message


async def _loop(
    session: LiveSession, prompt: list[Part], asker: _TurnAsker, emit: Emit
) -> StopReason:
    title = None if session.record.title else (_title_from(prompt) or None)
    # Committed with the turn's next write if that comes before the turn first waits (the
    # model answered at once), else as it waits: before any task its later events wake
    # runs (a follower may hear of its start, in the same step, first).
    await session.commit(UserMessage(parts=prompt), title, soon=True)
    session.working()  # stopping the turn from here on keeps what was asked
    if title:
        emit(TitleChanged(title))
    if session.stand_in is not None:
        return await _stood_in(session, session.stand_in, prompt, asker, emit)
    for notice in await session.load_tools():
        emit(Notice(notice))
    return await _steps(session, asker, emit, session.version - 1)


async def _stood_in(
    session: LiveSession, stand_in: StandIn, prompt: list[Part], asker: _TurnAsker, emit: Emit
) -> StopReason:
    """The turn answered by another agent: its words are the answer, its tool calls and
    plan the turn's, its permission requests asked as a tool's are (`_context`)."""
    relay = Relay(emit)
    call = ToolCall(id=f"{stand_in.name}_{uuid.uuid4().hex[:12]}", name=stand_in.name)
    ctx = dataclasses.replace(
        _context(session, call, asker, emit), progress=relay.progress, title=stand_in.name
    )
    text = "\n\n".join(p.text for p in prompt if isinstance(p, TextPart))
    try:
        reply = await stand_in.answer(text, ctx, relay.speak)
    except ToolError as exc:
        relay.end(Reply("", "end_turn"))
        raise StandInFailed(str(exc)) from None
    except BaseException:
        said = relay.end(Reply("", "cancelled"))
        if said:
            await asyncio.shield(session.commit(AssistantMessage(text=said)))
        raise
    said = relay.end(reply)
    if (spent := reply.usage) is not None:
        used = spent.input_tokens + spent.output_tokens
        emit(UsageUpdated(used, None, spent.estimated, spent.input_tokens, spent.output_tokens))
    await session.commit(AssistantMessage(text=said, usage=reply.usage))
    return reply.stop_reason


async def _steps(session: LiveSession, asker: _TurnAsker, emit: Emit, prompted: int) -> StopReason:
    """The turn's model calls and tool calls; `prompted` is the index of its prompt in the
    transcript (a compaction keeps the turn from there on)."""
    spoke = False
    for _ in range(session.limits.max_turn_steps):
        for text in session.take_steering():
            await session.commit(UserMessage(parts=[TextPart(text=text)]))
        lead = PARAGRAPH if spoke else ""
        assistant, finish = await _call_model(session, emit, lead, prompted)
        spoke = spoke or bool(assistant.text)
        if finish in ("max_tokens", "refusal"):
            return finish
        if not assistant.tool_calls:
            if session.has_steering():
                continue
            return "end_turn"
        try:
            await _run_tools(session, assistant.tool_calls, asker, emit)
        except asyncio.CancelledError:
            # Every tool call needs a result, or providers refuse the transcript.
            answered = _answered_ids(session)
            for unanswered in assistant.tool_calls:
                if unanswered.id not in answered:
                    await session.commit(
                        _result(unanswered, ToolOutput(CANCELLED_RESULT, is_error=True))
                    )
            raise
    return "max_turn_requests"


async def compact_session(session: LiveSession) -> CompactionUpdated:
    """Compact the session now, whatever its window's fill (`/compact`, Raven RPC's
    `session.compact`), keeping only its newest turn as it is: its followers hear it as
    they hear a turn's compaction; the last of it (completed, or failed and why) is
    returned. Raises `SessionBusy` or `SessionClosed` as a turn would, and
    `NothingToCompact` for a session too short."""
    turn = session.reserve()
    told: list[CompactionUpdated] = []

    def emit(event: TurnEvent) -> None:
        session.publish(event)
        if isinstance(event, CompactionUpdated):
            told.append(event)

    try:
        await session.claim(turn)
        try:
            system, tools = _request_start(session)
            fixed = len(system) + tools_chars(tools)
            await compaction.compact(session, emit, fixed, session.version, keep=False)
        finally:
            await session.let_claim_go(turn)
    finally:
        session.free(turn)
    return told[-1]


def _request_start(session: LiveSession) -> tuple[str, list[ToolSpec]]:
    """The system prompt (without a compaction's summary) and the tools of a model call."""
    tools = [ToolSpec(t.name, t.description, t.parameters()) for t in session.offered_tools()]
    system = system_prompt(
        session.cwd, date.today(), session.system or session.instructions, session.project.text
    )
    return system, tools


async def _call_model(
    session: LiveSession, emit: Emit, lead: str, prompted: int
) -> tuple[AssistantMessage, FinishReason]:
    """One model call, streamed as events; `lead` goes before the first text it shows.
    First the session is compacted if the call would pass its share of the window; a
    server that refuses it for passing the window has the session compacted to the
    window it names, and is asked once more."""
    system, tools = _request_start(session)
    fixed = len(system) + tools_chars(tools)
    window = session.context_window
    if compaction.due(session.compactor.settings, window, fixed + session.window_chars):
        with contextlib.suppress(compaction.NothingToCompact):
            await compaction.compact(session, emit, fixed, prompted)
    try:
        return await _answer(session, _request(session, system, tools), emit, lead)
    except ContextTooLong as exc:
        if not await _compacted_to(exc, session, emit, fixed, prompted):
            raise
    return await _answer(session, _request(session, system, tools), emit, lead)


def _request(session: LiveSession, system: str, tools: list[ToolSpec]) -> ModelRequest:
    return ModelRequest(
        system=compaction.with_summary(system, session.summary),
        messages=session.model_messages(),
        tools=tools,
    )


async def _compacted_to(
    refused: ContextTooLong, session: LiveSession, emit: Emit, fixed: int, prompted: int
) -> bool:
    """The window the server named (else nine tenths of what it refused) becomes the
    session's, and the session is compacted to it; False when it could not be."""
    if not session.compactor.settings.auto:
        return False
    sent = chars_tokens(fixed + session.window_chars)
    session.learned_window = refused.window or sent * 9 // 10
    log.info("%s; compacting to a window of %d tokens", refused, session.learned_window)
    try:
        return await compaction.compact(session, emit, fixed, prompted)
    except compaction.NothingToCompact:
        return False


async def _answer(
    session: LiveSession, request: ModelRequest, emit: Emit, lead: str
) -> tuple[AssistantMessage, FinishReason]:
    """The model's answer to `request`, streamed as events, committed."""
    text, thought = _Said(), _Said()
    calls: list[ToolCall] = []
    finish: FinishReason = "end_turn"
    reported_usage = False
    usage: TokenUsage | None = None
    # Deltas are re-cut where no credential can straddle two events, so each face's
    # redaction of an event sees a streamed key whole.
    shown_text, shown_thought = SafeChunks(), SafeChunks()
    stream = session.provider.stream(request)
    try:
        async for event in stream:
            if isinstance(event, TextDelta):
                text.add(event.text)
                if piece := shown_thought.flush():  # the thought ended where text began
                    emit(AgentThought(piece))
                if piece := shown_text.feed(event.text):
                    emit(AgentText(lead + piece))
                    lead = ""
            elif isinstance(event, ThoughtDelta):
                thought.add(event.text)
                if piece := shown_text.flush():
                    emit(AgentText(lead + piece))
                    lead = ""
                if piece := shown_thought.feed(event.text):
                    emit(AgentThought(piece))
            elif isinstance(event, ToolCallReady):
                calls.append(event.call)
            elif isinstance(event, Usage):
                reported_usage = True
                used = event.input_tokens + event.output_tokens
                window = session.context_window
                emit(
                    UsageUpdated(
                        used, window, event.estimated, event.input_tokens, event.output_tokens
                    )
                )
                usage = TokenUsage(
                    by=session.model.id,
                    input_tokens=event.input_tokens,
                    output_tokens=event.output_tokens,
                    estimated=event.estimated,
                )
            elif isinstance(event, Finish):
                finish = event.reason
    except BaseException:
        if text:
            said = AssistantMessage(text=text.taken(), thought=thought.taken())
            await asyncio.shield(session.commit(said))
        raise
    finally:
        _flush(shown_text, shown_thought, emit, lead)
        await stream.aclose()  # type: ignore[attr-defined]
    spoken = text.taken()
    if not reported_usage:
        answer = spoken + "".join(c.raw_arguments or "" for c in calls)
        used = estimate_tokens(request, answer)
        emit(UsageUpdated(used, session.context_window, estimated=True))
        wrote = estimate_text_tokens(answer)
        usage = TokenUsage(
            by=session.model.id, input_tokens=used - wrote, output_tokens=wrote, estimated=True
        )
    if finish in ("max_tokens", "refusal"):
        calls = []
    calls = _described(session, calls)
    message = AssistantMessage(text=spoken, thought=thought.taken(), tool_calls=calls, usage=usage)
    await session.commit(message)
    return message, finish


class _Said:
    """What the model has said so far in one stream (its text, or its thought), from
    deltas of a word or so each: kept as UTF-8, a long answer is held in about as many
    bytes as it has (not two or four a character, as a Python string of it may be), and
    `taken` once as text, the buffer let go as it is."""

    def __init__(self) -> None:
        self._utf8 = bytearray()

    def add(self, delta: str) -> None:
        self._utf8 += delta.encode("utf-8", "surrogatepass")

    def __bool__(self) -> bool:
        return bool(self._utf8)

    def taken(self) -> str:
        said = self._utf8.decode("utf-8", "surrogatepass")
        self._utf8 = bytearray()
        return said


def _flush(text: SafeChunks, thought: SafeChunks, emit: Emit, lead: str) -> None:
    """What the chunkers still hold goes out: the model's text or thought has ended."""
    if piece := thought.flush():
        emit(AgentThought(piece))
    if piece := text.flush():
        emit(AgentText(lead + piece))


def _described(session: LiveSession, calls: list[ToolCall]) -> list[ToolCall]:
    """The calls with the title and kind people see, stored with them for replays."""
    if not calls:
        return calls
    tools = {t.name: t for t in session.offered_tools()}
    ctx = ToolContext(cwd=session.cwd, limits=session.limits, ask=_no_answer, session_id=session.id)
    described = []
    for call in calls:
        tool = tools.get(call.name)
        title, kind = call.name, "other"
        if tool is not None:
            kind = tool.kind
            try:
                if call.raw_arguments is None:
                    title = tool.title(tool.args_model.model_validate(call.arguments), ctx)
            except (ToolError, ValidationError):
                title = tool.name
        described.append(call.model_copy(update={"title": title, "kind": kind}))
    return described


async def _no_answer(question: Question) -> str | None:
    return None


async def _run_tools(
    session: LiveSession, calls: Sequence[ToolCall], asker: _TurnAsker, emit: Emit
) -> None:
    """Run one step's tool calls; their results are committed in the model's order.

    Calls are prepared in order (validated, announced, approved one at a time);
    each starts as soon as it is approved, at most `MAX_PARALLEL_TOOLS` at once.
    Questions and approvals from running tools are asked one at a time too.
    """
    tools = {t.name: t for t in session.offered_tools()}
    slots = asyncio.Semaphore(MAX_PARALLEL_TOOLS)
    async with asyncio.TaskGroup() as group:
        running = []
        for call in calls:
            ready = await _prepare(session, tools.get(call.name), call, asker, emit)
            if isinstance(ready, ToolOutput):
                output: asyncio.Future[ToolOutput] = asyncio.get_running_loop().create_future()
                output.set_result(ready)
                running.append((call, output))
                continue
            running.append((call, group.create_task(_execute(session, *ready, slots, emit))))
        for call, result in running:
            await _finish(session, call, await result, emit)


async def _prepare(
    session: LiveSession, tool: Tool | None, call: ToolCall, asker: _TurnAsker, emit: Emit
) -> tuple[Tool, ToolCall, Any, ToolContext] | ToolOutput:
    """Validate, announce and approve one call: what to run, or the result it already has."""
    ctx = _context(session, call, asker, emit)
    if tool is None:
        names = ", ".join(t.name for t in session.offered_tools())
        emit(ToolCallStarted(call.id, call.name, call.name, "other", call.arguments))
        return ToolOutput(f"Unknown tool {call.name!r}. Available tools: {names}", is_error=True)
    try:
        if call.raw_arguments is not None:
            raise ToolError(f"the arguments must be a JSON object, got: {call.raw_arguments[:200]}")
        args = tool.args_model.model_validate(call.arguments)
    except (ToolError, ValidationError) as exc:
        emit(ToolCallStarted(call.id, tool.name, tool.name, tool.kind, call.arguments))
        return ToolOutput(_invalid(exc), is_error=True)
    try:  # a tool may refuse here, before anyone is asked (a path outside the cwd, say)
        title = ctx.title = call.title or tool.title(args, ctx)
        locations = tool.locations(args, ctx)
    except ToolError as exc:
        emit(ToolCallStarted(call.id, tool.name, tool.name, tool.kind, call.arguments))
        return ToolOutput(str(exc), is_error=True)
    emit(ToolCallStarted(call.id, tool.name, title, tool.kind, call.arguments, locations))
    if tool.needs_approval:
        request = ApprovalRequest(
            call.id,
            tool.name,
            title,
            tool.kind,
            call.arguments,
            locations,
            preview=await _preview(tool, args, ctx),
        )
        verdict = await _decide(session, asker, request)
        if not _allows(verdict):
            return ToolOutput(NOT_RUN_RESULTS.get(verdict, REJECTED_RESULT), is_error=True)
    return tool, call, args, ctx


async def _execute(
    session: LiveSession,
    tool: Tool,
    call: ToolCall,
    args: Any,
    ctx: ToolContext,
    slots: asyncio.Semaphore,
    emit: Emit,
) -> ToolOutput:
    async with slots:
        emit(ToolCallUpdated(call.id, "in_progress"))
        run = asyncio.ensure_future(tool.run(args, ctx))
        try:
            with session.calling(call.id, run, ctx.parts):
                return await run
        except asyncio.CancelledError:
            this = asyncio.current_task()
            if run.cancelled() and this is not None and not this.cancelling():
                return ToolOutput(CANCELLED_RESULT, is_error=True)  # this call alone
            emit(ToolCallUpdated(call.id, "failed", CANCELLED_RESULT))
            raise
        except ToolError as exc:
            return ToolOutput(str(exc), is_error=True)
        except Exception as exc:
            log.exception("tool %s failed", tool.name)
            return ToolOutput(f"{tool.name} failed: {type(exc).__name__}: {exc}", is_error=True)


async def _preview(tool: Tool, args: Any, ctx: ToolContext) -> Preview | None:
    """What the call will do, for the approval; none when the tool cannot tell (the call
    itself will say why it fails)."""
    try:
        return await tool.preview(args, ctx)
    except (ToolError, OSError):
        return None
    except Exception:
        log.exception("tool %s failed to preview a call", tool.name)
        return None


def _context(session: LiveSession, call: ToolCall, asker: _TurnAsker, emit: Emit) -> ToolContext:
    """What a tool may use: the session's cwd and limits, and the face, through the engine."""

    async def approve(permission: Permission) -> Decision | None:
        verdict = await _decide(session, asker, approval_of(call.id, permission))
        return verdict if verdict in ALL_DECISIONS else None  # type: ignore[return-value]

    def progress(update: Progress) -> None:
        title = None
        if update.step is not None:
            title = f"{ctx.title} · {update.step}" if update.step else ctx.title
        text = update.text or None
        emit(ToolCallUpdated(call.id, "in_progress", text, detail=update.detail, title=title))

    ctx = ToolContext(
        cwd=session.cwd,
        limits=session.limits,
        ask=lambda q: _ask(session, asker, dataclasses.replace(q, call_id=call.id)),
        session_id=session.id,
        progress=progress,
        approve=approve,
        sandbox=session.sandbox,
    )
    return ctx


class _TurnAsker:
    """The face's asker for one turn: one approval or question at a time, in call order,
    with the face's standing policy beside it. Each asking is logged (`Asking`, then
    `Answered`), and an answer given elsewhere (`LiveSession.answer`: another face, or
    another replica) wins over the face's own, whose asking is then withdrawn."""

    def __init__(self, session: LiveSession, asker: Asker, standing: ApprovalPolicy) -> None:
        self._session = session
        self._asker = asker
        self.standing = standing
        self._lock = asyncio.Lock()

    async def approve(self, request: ApprovalRequest) -> Decision | Unanswered:
        async with self._lock:
            rid = uuid.uuid4().hex
            request = dataclasses.replace(request, request_id=rid)
            verdict: Decision | Unanswered = await self._either(
                Asking(rid, approval=request), self._asker.approve(request)
            )
            return verdict  # `_decide` takes anything not offered as a rejection

    async def ask(self, question: Question) -> str | None:
        async with self._lock:
            rid = uuid.uuid4().hex
            question = dataclasses.replace(question, request_id=rid)
            answer = await self._either(Asking(rid, question=question), self._asker.ask(question))
            return answer if isinstance(answer, str) else None

    async def _either(self, asking: Asking, face: Coroutine[Any, Any, Any]) -> Any:
        """The face's answer, or one given elsewhere, whichever comes first."""
        session, rid = self._session, asking.request_id
        elsewhere = session.awaiting(rid)
        own = asyncio.ensure_future(face)
        session.publish(asking)
        try:
            await asyncio.wait([own, elsewhere], return_when=asyncio.FIRST_COMPLETED)
            if elsewhere.done():
                return elsewhere.result()
            return own.result()
        finally:
            for waiter in (own, elsewhere):
                waiter.cancel()
            if not own.done():  # the face withdraws its asking before the turn goes on
                _, stuck = await asyncio.wait([own], timeout=WITHDRAW_S)
                if stuck:
                    log.warning("a face took over %gs to withdraw its asking", WITHDRAW_S)
            session.settled(rid)
            session.publish(Answered(rid))


async def _finish(session: LiveSession, call: ToolCall, output: ToolOutput, emit: Emit) -> None:
    text = clip(output.text, session.limits.tool_output_chars)
    await session.commit(_result(call, dataclasses.replace(output, text=text)))
    status: ToolStatus = "failed" if output.is_error else "completed"
    emit(ToolCallUpdated(call.id, status, shown(text), output.diff))
    if output.plan is not None:
        emit(PlanUpdated(output.plan))


def _answered_ids(session: LiveSession) -> set[str]:
    return {m.call_id for m in session.window if isinstance(m, ToolResultMessage)}


def _result(call: ToolCall, output: ToolOutput) -> ToolResultMessage:
    return ToolResultMessage(
        call_id=call.id,
        name=call.name,
        content=output.text,
        is_error=output.is_error,
        images=list(output.images),
        usage=output.usage,
    )


async def _decide(
    session: LiveSession, asker: _TurnAsker, request: ApprovalRequest
) -> Decision | Unanswered:
    """The session's answer: its mode's policy, then the face's, then what it remembers,
    then the asker."""
    policy = session.mode.approvals if session.mode else "ask"
    if policy == "ask":
        policy = asker.standing
    if policy == "auto" and not request.person:
        return _offered_like("allow_once", request.offered)
    if policy == "deny":
        return "refused"
    if request.tool in session.remembered:
        wanted: Decision = "allow_always" if session.remembered[request.tool] else "reject_always"
        return _offered_like(wanted, request.offered)
    verdict: Decision | Unanswered
    try:
        async with asyncio.timeout(session.limits.question_timeout_s):
            verdict = await asker.approve(request)
    except TimeoutError:
        log.warning("approval for %s timed out; not run", request.tool)
        return "unanswered"
    if verdict in ("refused", "unanswered", "cancelled"):
        return verdict
    if verdict not in request.offered:
        return _offered_like("reject_once", request.offered)
    if verdict == "allow_always":
        session.remembered[request.tool] = True
    elif verdict == "reject_always":
        session.remembered[request.tool] = False
    return verdict


def _allows(decision: Decision | Unanswered) -> bool:
    return decision in ("allow_once", "allow_always")


def _offered_like(wanted: Decision, offered: Sequence[Decision]) -> Decision:
    """`wanted`, or the offered decision closest to it (same allow/reject, other duration)."""
    if wanted in offered:
        return wanted
    same_side = [d for d in offered if _allows(d) == _allows(wanted)]
    return same_side[0] if same_side else wanted


async def _ask(session: LiveSession, asker: _TurnAsker, question: Question) -> str | None:
    try:
        async with asyncio.timeout(session.limits.question_timeout_s):
            return await asker.ask(question)
    except TimeoutError:
        log.warning("question timed out unanswered")
        return None


def _invalid(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return f"Invalid arguments: {invalid_fields(exc, 'arguments')}"
    return f"Invalid arguments: {exc}"


def _title_from(prompt: list[Part]) -> str:
    """The session's title: the first line of the prompt's prose (what is outside its code
    blocks: `cat log | raven run "what failed?"` is titled by the question), else of the
    code itself; shortened to `TITLE_CHARS`. The last text part, the person's own words
    after any attached files (`raven run -f calc.py "explain"`), is looked at first."""
    texts = [p.text for p in prompt if isinstance(p, TextPart)]
    for text in (texts[-1] if texts else "", "\n".join(texts)):
        prose = _FENCED.sub("", text)
        for candidate in (prose, text):
            for line in candidate.splitlines():
                first = line.strip()
                if first and not first.startswith("```"):
                    short = first[: TITLE_CHARS - 1].rstrip() + "…"
                    return first if len(first) <= TITLE_CHARS else short
    return ""


_FENCED = re.compile(r"^```.*?^```[^\n]*$", re.MULTILINE | re.DOTALL)
