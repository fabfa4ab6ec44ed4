"""POST /v1/chat/completions, /v1/responses, /v1/messages and Gemini's
/v1beta/models/{model}:generateContent (and :streamGenerateContent): one path for all four APIs.

route -> parse -> engine.decide (pure) -> store -> render or forward. Served by proxy.http.front as
plain ASGI (not FastAPI routes): these are the hot paths.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import orjson
from starlette.responses import Response

from proxy.apis import Api
from proxy.apis.chat import chat_message
from proxy.errors import (
    Fenced,
    InjectedFault,
    ProxyError,
    error_response,
)
from proxy.http import handoff, relay
from proxy.http.answers import own_headers, rendered
from proxy.http.diverged import count
from proxy.http.faulted import fault_error, faulted
from proxy.http.incoming import Incoming
from proxy.http.inflight import InFlight
from proxy.http.recorded import answer_recorded
from proxy.lineage import lineage_of
from proxy.offload import Decided
from proxy.recording.recorder import RawJson
from proxy.recording.tap import dump_record
from proxy.replay.conversation import Conversation, Lane, session_id, session_problem
from proxy.replay.engine import (
    Diverged,
    Forward,
    ForwardReason,
    Scripted,
    decide,
)
from proxy.replay.faults import Fault
from proxy.replay.presets import recognise
from proxy.replay.text_based import belongs
from proxy.replay.trajectory import Trajectory
from proxy.runtime import Runtime
from proxy.serving import Answer, FaultError, Refused, Source, outcome, reads_preset
from proxy.sessions.registry import Binding

log = logging.getLogger("proxy.requests")
T = TypeVar("T")


async def serve(request: Incoming, runtime: Runtime, *, api: Api) -> Response:
    started = time.perf_counter()
    raw = request.body
    agent = request.headers.get("user-agent") or ""
    offload = runtime.offload
    offloaded, seen = None, None
    if offload is not None and offload.takes(len(raw), api):
        offloaded = offload.request(api, raw, request.path, request.query)
        runtime.metrics.offloaded("read")
        dumping = runtime.dumper is not None and not runtime.strict
        seen = await offload.examine(offloaded, user_agent=agent, history=dumping)
        body, conv, results = seen.shallow, seen.conv, seen.results
    else:
        body, conv = await _off_loop_if(request.large, partial(_read, request, api))
        results = bool(conv.results)
    session = request.session or session_id(request.headers, runtime.settings.session_header, conv)
    lineage = lineage_of(request.headers, runtime.settings.subagent_header, session)
    parent = lineage.parent if lineage is not None else None
    lane = conv.lane(subagent=lineage is not None)
    preset = None
    recording = runtime.recorder is not None
    presets = runtime.settings.presets
    if reads_preset(presets=presets, strict=runtime.strict, recording=recording, results=results):
        preset = seen.preset if seen is not None else recognise(body, agent)
    binding = None
    if lane is Lane.TOOLLESS:  # a side call, unless it is a text-based script's conversation
        binding = await _text_based(request, runtime, conv, session)
        lane = Lane.MAIN if binding is not None else lane
    tap = None
    if runtime.recorder or runtime.dumper or runtime.tracer:  # the call costs 2k otherwise
        tap = relay.tap(
            runtime,
            request,
            session=session,
            lane=lane,
            api=api,
            body=body if offloaded is None else RawJson(raw),  # recorded as it came
            stream=conv.stream,
            perf_start=started,
            model=conv.model,
        )
        if tap is not None and preset is not None:
            tap.exchange.preset = preset.name
    headers = [(b"x-replay-session", session.encode())]
    call = InFlight(
        request,
        runtime,
        api,
        conv,
        body,
        raw,
        session,
        lane,
        parent,
        tap,
        started,
        headers,
        preset,
        request.trajectory,
        offloaded,
        seen.replies if seen is not None else len(conv.replies),
        seen.history if seen is not None else None,
    )

    # the session a subagent's calls belong to: its root's (an opencode child is a session of
    # its own, whose parent its header names)
    parent = lineage.parent_session if lineage is not None else None
    root = parent if parent is not None and session_problem(parent) is None else session
    if lane is Lane.SUBAGENT and lineage is not None:
        key = session if root != session else lineage.child  # the live child's own id
        child = await runtime.sessions.child_for(root, key, conv)
        if child is not None:  # a child the run recorded: its own lane replays it
            call.root, call.lineage = root, lineage
            call.session, call.trajectory = child
            return await _main(call, None)
    if lane is not Lane.MAIN:
        # before the cut a resumed session's side calls are its recording's; strict mode's
        # always are (proxy.http.recorded)
        resumed = not runtime.strict and await handoff.before_cut(call, root)
        if runtime.strict or resumed:
            fenced = handoff.said(call, lineage) if resumed and runtime.settings.fence else None
            try:
                response = await answer_recorded(
                    request, runtime, root, lane, body, call.headers, tap, preset, offloaded,
                    resumed=resumed, fenced=fenced,
                )  # fmt: skip
            except Fenced as error:  # the session's status says what was kept from the upstream
                await runtime.sessions.record_error(root, lane, error.message)
                raise
            if response is not None:
                call.done(Source.RECORDED, "-", response.status_code)
                return response
        state = (
            await runtime.sessions.record(
                session, lane, None, upstream=call.upstream(), lineage=lineage
            )
        ).state
        return await _forward(call, state.prefix_messages, "-")
    return await _main(call, binding)


def _read(request: Incoming, api: Api) -> tuple[dict[str, Any], Conversation]:
    body = request.json()
    return body, api.conversation(body, request.path, request.query)


async def _text_based(
    request: Incoming, runtime: Runtime, conv: Conversation, session: str
) -> Binding | None:
    """The session's binding when this tool-less request is the conversation of a text-based
    script (proxy.replay.text_based); None for a side call, which binds and consumes nothing."""
    masks = runtime.rules.masks
    # strict mode refuses a branch on the main lane; a side call was never asked about one
    branch = None if runtime.strict else request.branch
    binding = await runtime.sessions.script_for(
        session,
        conv,
        request.trajectory,
        branch,
        fits=lambda script: belongs(conv, script, masks),
    )
    return binding if binding.trajectory is not None else None


async def _main(call: InFlight, binding: Binding | None) -> Response:
    runtime, conv = call.runtime, call.conv
    if binding is None:
        if call.root is not None:  # a child's lane: its script is the recorded child's
            binding = await runtime.sessions.script_for(
                call.session, conv, call.trajectory, whole=True
            )
        else:
            binding = await runtime.sessions.script_for(
                call.session, conv, call.request.trajectory, call.request.branch
            )
    script, state = binding.trajectory, binding.state
    if script is not None:
        call.trajectory = script.name
    branch = state.replay_turns if state is not None else None
    observed = state.results_checked if state is not None else None
    if call.offloaded is not None and script is not None and runtime.offload is not None:
        runtime.metrics.offloaded("decide")
        decided = await runtime.offload.decide(
            call.offloaded,
            script,
            live_after_divergence=binding.live_after_divergence,
            branch=branch,
            preset=call.preset,
            history=call.history is not None,
            observed=observed,
            session=call.session,
        )
        decision = decided.decision
    else:
        decided = None
        decision = await _off_loop_if(
            call.request.large and script is not None,  # no script: nothing to read
            partial(
                decide,
                conv,
                script,
                live_after_divergence=binding.live_after_divergence,
                rules=runtime.rules,
                body=call.body if runtime.strict else None,
                branch=branch,
                preset=call.preset,
                observed=observed,
                session=call.session,
            ),
        )
    if call.root is not None and isinstance(decision, Forward) and not runtime.strict:
        await handoff.child_fenced(call, call.root, decision)
    refused = runtime.strict and isinstance(decision, Forward)  # strict mode never goes live
    lanes = None  # a root with replayed children: their verdicts are part of its own
    if call.root is None and state is not None and state.children and state.restore is None:
        lanes = await runtime.sessions.lanes(call.session, state)
    state, fault, settled = await runtime.sessions.record(
        call.session,
        call.lane,
        decision,
        messages=conv.message_count,
        preset=call.preset.name if call.preset else None,
        upstream=call.upstream() if isinstance(decision, Forward) and not refused else None,
        refused=refused,
        script=script,
        lanes=lanes,
    )
    if settled:
        handoff.settled(call, state.restore)
    if call.root is not None:
        await runtime.sessions.child_observed(call.root, decision)
        if settled:  # the root's verdict may have been waiting for this child's lane
            handoff.root_settled(call, await runtime.sessions.child_settled(call.root))
    unlike = decision.observations.divergence
    if unlike is not None:
        count(runtime, unlike)
        if not isinstance(decision, Diverged):
            log.warning("session=%s %s", call.session, unlike.describe())
    if isinstance(decision, Scripted) and decision.volatile is not None:
        count(runtime, decision.volatile)
        log.warning(
            "session=%s served despite a volatile difference (--fail-on changed): %s",
            call.session,
            decision.volatile.describe(),
        )

    result = outcome(
        decision, api=call.api, conv=conv, body=call.body, size=len(call.raw), script=script,
        fault=fault, strict=runtime.strict, session=call.session, lane=str(call.lane),
        preset=call.preset,
    )  # fmt: skip
    if isinstance(result, Refused) and not result.raised:
        assert isinstance(decision, Diverged)
        count(runtime, decision.divergence)
        log.warning(
            "session=%s diverged at step %s of %s: %s",
            call.session,
            decision.divergence.turn,
            decision.total,
            decision.divergence.describe(),
        )
        call.done(result.source, result.label, result.error.status)
        if call.tap is not None:
            call.tap.trajectory = call.trajectory
            call.tap.divergence = decision.divergence.describe()
            call.tap.verdict = decision.divergence.verdict.verdict
            await call.tap.error(result.error)
        # answered here, not raised: front.answer_error would count it a second time, as an error
        return error_response(result.error, shape=call.api.error_body)
    if isinstance(result, FaultError):
        return await _fault_error(call, result.fault, result.label)  # instead of the turn
    if isinstance(result, Answer):
        return _answer(call, result)
    assert isinstance(decision, Forward)
    if decision.divergence is not None:
        count(runtime, decision.divergence)
    if isinstance(result, Refused):
        log.warning(
            "session=%s refused: strict replay has no recording for it (%s)",
            call.session,
            decision.reason,
        )
        raise result.error
    # a root's live call is told its cut (a child lane's is its root's business: above)
    live_root = call.root is None and decision.reason is not ForwardReason.NO_SCRIPT
    if state.restore is not None and live_root:
        handoff.hand_off(call, state.restore, runtime.sessions.holds_back(state, decision))
    if decided is not None:
        _prepared_elsewhere(call, decided)
    elif script is not None:
        await _off_loop_if(call.request.large, partial(_prepare_live, call, decision, script))
    first_live = state.prefix_messages == conv.message_count and decision.held > 0
    if runtime.settings.handoff_tokens and live_root and first_live:
        handoff.with_prefix_tokens(call, script, decision, state.restore)
    return await _forward(call, state.prefix_messages, str(decision.reason))


async def _off_loop_if(large: bool, work: Callable[[], T]) -> T:
    """`work` (pure, or touching only this request) in a thread when the request is large: the
    event loop keeps serving other clients meanwhile."""
    return await asyncio.to_thread(work) if large else work()


def _prepare_live(call: InFlight, decision: Forward, script: Trajectory) -> None:
    """Splice the recording's later user messages in; take out what only the proxy made up."""
    tokens = script.tokens_upstream(call.runtime.settings.handoff_tokens)
    live, spliced = call.api.live(call.body, decision.splice, tokens=tokens)
    if live is not None:
        # a new body: the recording keeps the one the client sent as its request
        call.body, call.raw = live, orjson.dumps(live)
        if call.tap is not None:
            call.tap.exchange.forwarded = live
    if spliced:
        call.headers.append((b"x-replay-spliced", str(spliced).encode()))


def _prepared_elsewhere(call: InFlight, decided: Decided) -> None:
    """What _prepare_live does, done by the worker that decided (an offloaded body)."""
    if decided.raw is not None:
        call.raw = decided.raw
        if call.tap is not None:
            call.tap.exchange.forwarded = RawJson(decided.raw)
    call.history = decided.history
    if decided.spliced:
        call.headers.append((b"x-replay-spliced", str(decided.spliced).encode()))


async def _forward(call: InFlight, prefix: int | None, reason: str) -> Response:
    tap = call.tap
    if tap is not None and tap.dumper is not None:
        tap.dump = dump_record(
            session=call.session,
            parent=call.parent,
            lane=call.lane,
            turn=call.replies + 1,
            started=tap.exchange.started,
            prefix=prefix,
            messages=call.body.get(call.api.history)
            if call.offloaded is None
            else orjson.Fragment(call.history or b"null"),
        )
    if tap is not None:
        tap.exchange.source = Source.UPSTREAM
        tap.exchange.upstream = call.upstream()
    try:
        response = await relay.send(
            call.runtime,
            call.request,
            call.raw,
            call.headers,
            tap,
            api=call.api.name,
            started=call.started,
            values=call.values,
            dialect=call.api.upstream,
            # the body that call.raw holds, read already (an offloaded one was read elsewhere)
            parsed=call.body if call.offloaded is None else None,
        )
    except ProxyError as error:
        # the status says it was not answered
        await call.runtime.sessions.record_error(call.session, call.lane, error.message)
        raise
    call.done(Source.UPSTREAM, reason, response.status_code)
    return response


def _answer(call: InFlight, answer: Answer) -> Response:
    """The rendered turn as bytes, with the headers that say what it is, shaped by its fault."""
    label, fault, parts = answer.label, answer.fault, answer.parts
    headers = own_headers(call.headers, answer.source.encode(), (b"x-replay-turn", label.encode()))
    if fault is not None:
        _injected(call, fault, label)
        headers.append((b"x-replay-fault", fault.label.encode()))
        if call.tap is not None:
            call.tap.fault = fault.label
    call.done(Source.FAULT if answer.cut else answer.source, label, 200)
    on_complete = None
    tap = call.tap
    if tap is not None:
        tap.trajectory = call.trajectory
    if tap is not None and answer.cut:
        error = InjectedFault(200, f"fault injected at turn {label}: drop")

        async def on_complete() -> None:  # when the cut is made: recorded as the fault it is
            await tap.error(error, Source.FAULT)

    elif tap is not None:
        tap.exchange.source = Source.SCRIPTED
        message = chat_message(answer.turn)
        stream, usage = call.conv.stream, answer.turn.usage

        async def on_complete() -> None:
            await tap.rendered(parts, stream=stream, message=message, turn=label, usage=usage)

    if fault is not None:  # a stream is cut as SSE events, then framed
        return faulted(
            fault, parts, headers, content_type=answer.content_type, on_complete=on_complete,
            call_event=call.api.call_event, framing=answer.framing,
        )  # fmt: skip
    return rendered(
        answer.wire(), headers, content_type=answer.content_type, on_complete=on_complete
    )


def _injected(call: InFlight, fault: Fault, label: str) -> None:
    call.runtime.metrics.fault(fault.kind.value)
    log.info("session=%s turn %s: fault %s injected", call.session, label, fault.label)


async def _fault_error(call: InFlight, fault: Fault, label: str) -> Response:
    """429, 500 or 503 instead of the turn: the harness retries, and gets the same turn."""
    headers = [
        *call.headers,
        (b"x-replay-source", Source.FAULT.encode()),
        (b"x-replay-turn", label.encode()),
        (b"x-replay-fault", fault.label.encode()),
    ]
    _injected(call, fault, label)
    where = f"turn {label} of session {call.session}"
    response, error = fault_error(fault, api=call.api, where=where, headers=headers)
    call.done(Source.FAULT, label, error.status)
    if call.tap is not None:
        call.tap.fault = fault.label
        await call.tap.error(error, Source.FAULT)
    return response
