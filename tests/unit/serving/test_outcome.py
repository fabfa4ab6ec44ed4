"""The request core, step by step and with no socket: a decision (and the fault due at its turn)
in, what the request gets out. Each case is a request history decided against a small script,
as proxy.http.completions does it, then read as an Outcome."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import orjson
import pytest

from proxy.apis import ANTHROPIC, BEDROCK, CHAT, Api
from proxy.apis.readback import sse_events
from proxy.errors import NotFound, ReplayDiverged
from proxy.formats import load_bytes
from proxy.replay.engine import AfterScript, Forward, ForwardReason, Rules, Stop, decide
from proxy.replay.faults import parse_flag
from proxy.replay.trajectory import Recorded, Trajectory
from proxy.serving import Answer, FaultError, Live, Refused, Source, outcome
from proxy.serving.outcome import STOP_TEXT

TOOLS = [{"type": "function", "function": {"name": "bash", "parameters": {}}}]
CALL = {
    "id": "c1",
    "type": "function",
    "function": {"name": "bash", "arguments": '{"command": "ls"}'},
}
SCRIPT = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "task"},
    {"role": "assistant", "content": "Listing.", "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "c1", "content": "a b"},
    {"role": "assistant", "content": "Done."},
]
OPENING = SCRIPT[:2]


def script() -> Trajectory:
    return load_bytes(json.dumps(SCRIPT).encode(), name="run", filename="run.json")


def body(*history: dict[str, Any], stream: bool = False) -> dict[str, Any]:
    return {"model": "m", "messages": [*OPENING, *history], "tools": TOOLS, "stream": stream}


def decided(
    request: dict[str, Any],
    *,
    api: Api = CHAT,
    fault: str | None = None,
    strict: bool = False,
    rules: Rules | None = None,
    trajectory: Trajectory | None = None,
) -> Any:
    """The request decided against the script, then read as the core reads it."""
    conv = api.parse(request)
    script_ = trajectory if trajectory is not None else script()
    decision = decide(conv, script_, rules=rules or Rules())
    due = parse_flag(fault) if fault else None
    return outcome(
        decision, api=api, conv=conv, body=request, size=len(orjson.dumps(request)),
        script=script_, fault=due, strict=strict, session="s1",
    )  # fmt: skip


def test_the_first_turn_is_answered_from_the_script() -> None:
    got = decided(body())
    assert isinstance(got, Answer)
    assert (got.source, got.label, got.fault, got.framing) == (Source.SCRIPTED, "1/2", None, None)
    assert got.content_type == b"application/json"
    [whole] = got.parts
    message = orjson.loads(whole)["choices"][0]["message"]
    assert message["tool_calls"][0]["id"] == "c1" and message["content"] == "Listing."
    # the usage is estimated from the request's size, and said to be
    assert got.turn.usage is not None and got.turn.usage.estimated


def test_a_stream_is_its_events_and_the_apis_framing_goes_with_them() -> None:
    got = decided(body(stream=True))
    assert isinstance(got, Answer) and got.framing is not None
    assert got.content_type.startswith(b"text/event-stream")
    assert got.wire() == got.parts  # SSE: the events are the wire
    request = {"max_tokens": 64, "messages": [{"role": "user", "content": "task"}],
               "system": "sys", "tools": [{"name": "bash", "input_schema": {}}]}  # fmt: skip
    conv = BEDROCK.parse(request)
    BEDROCK.target(conv, "/model/m-1/invoke-with-response-stream", "")  # type: ignore[misc]
    framed = outcome(
        decide(conv, script(), rules=Rules()), api=BEDROCK, conv=conv, body=request, size=10,
        script=script(), fault=None, strict=False, session="s1",
    )  # fmt: skip
    assert (
        isinstance(framed, Answer) and framed.content_type == b"application/vnd.amazon.eventstream"
    )
    assert b"event: message_start" in framed.parts[0]  # the core keeps SSE events...
    wire = b"".join(framed.wire())
    assert b"event: message_start" not in wire  # ...the wire has them in frames
    assert BEDROCK.framing.sse(wire) == b"".join(framed.parts)


def test_the_second_turn_follows_the_first_turns_result() -> None:
    got = decided(body(SCRIPT[2], SCRIPT[3]))
    assert isinstance(got, Answer) and got.label == "2/2"
    assert orjson.loads(got.parts[0])["choices"][0]["message"]["content"] == "Done."


def test_a_history_that_left_the_script_is_refused_in_place() -> None:
    other = {**CALL, "id": "c9", "function": {"name": "bash", "arguments": '{"command": "rm"}'}}
    wrong = {"role": "assistant", "content": "Listing.", "tool_calls": [other]}
    got = decided(body(wrong, {"role": "tool", "tool_call_id": "c9", "content": ""}))
    assert isinstance(got, Refused) and not got.raised
    assert got.source is Source.DIVERGED and got.label.endswith("/2")
    assert isinstance(got.error, ReplayDiverged) and "c1" in got.error.message


def test_an_error_fault_replaces_its_turn_and_a_cut_shapes_it() -> None:
    got = decided(body(), fault="1:429")
    assert isinstance(got, FaultError) and got.label == "1/2" and got.fault.kind.status == 429
    cut = decided(body(stream=True), fault="1:drop")
    assert isinstance(cut, Answer) and cut.cut and cut.fault is not None
    assert cut.source is Source.SCRIPTED  # recorded and counted as the fault by the I/O side
    # a delay or a stall shapes the answer; which fault is due at a turn is the store's to say
    stalled = decided(body(stream=True), fault="1:stall:2")
    assert isinstance(stalled, Answer) and stalled.fault is not None and not stalled.cut


def test_after_the_script_it_goes_live_or_stops() -> None:
    history = (*SCRIPT[2:4], SCRIPT[4], {"role": "user", "content": "more"})
    live = decided(body(*history))
    assert isinstance(live, Live) and live.decision.reason is ForwardReason.SCRIPT_DONE
    stopped = decided(body(*history), rules=Rules(after_script=AfterScript.STOP))
    assert isinstance(stopped, Answer) and stopped.source is Source.STOP
    assert stopped.label == "stop"
    text = orjson.loads(stopped.parts[0])["choices"][0]["message"]["content"]
    assert text == STOP_TEXT.format(total=2)


def test_strict_replay_never_goes_live() -> None:
    history = (*SCRIPT[2:4], SCRIPT[4], {"role": "user", "content": "more"})
    got = decided(body(*history), strict=True)
    assert isinstance(got, Refused) and got.raised and isinstance(got.error, NotFound)
    assert "strict replay" in got.error.message


def test_a_recorded_answer_is_served_as_it_was_recorded_in_its_own_api() -> None:
    recorded_body = b'event: message_start\ndata: {"type":"message_start"}\n\n'
    kept = Recorded(0, "anthropic", "main", "POST", "/v1/messages", {}, 200, True,
                    "text/event-stream", recorded_body)  # fmt: skip
    plain = script()
    first = dataclasses.replace(plain.turns[0], recorded=kept)
    trajectory = dataclasses.replace(plain, turns=(first, *plain.turns[1:]))
    request = {"model": "m", "max_tokens": 8, "stream": True, "system": "sys",
               "messages": [{"role": "user", "content": "task"}],
               "tools": [{"name": "bash", "input_schema": {}}]}  # fmt: skip
    got = decided(request, api=ANTHROPIC, trajectory=trajectory)
    assert isinstance(got, Answer) and got.parts == [recorded_body]
    # over another API, the turn is rendered in that API instead
    other = decided(body(stream=True), trajectory=trajectory)
    assert isinstance(other, Answer) and other.parts != [recorded_body]
    assert sse_events(b"".join(other.parts))[-1] == "data: [DONE]"


@pytest.mark.parametrize("decision", [Stop(total=2)])
def test_a_stop_with_an_error_fault_is_still_the_stop_turn(decision: Stop) -> None:
    conv = CHAT.parse(body())
    got = outcome(
        decision, api=CHAT, conv=conv, body=body(), size=1, script=script(),
        fault=parse_flag("3:503"), strict=False, session="s1",
    )  # fmt: skip
    assert isinstance(got, Answer) and got.source is Source.STOP


def test_forward_with_no_script_goes_live() -> None:
    conv = CHAT.parse(body())
    got = outcome(
        Forward(ForwardReason.NO_SCRIPT), api=CHAT, conv=conv, body=body(), size=1, script=None,
        fault=None, strict=False, session="s1",
    )  # fmt: skip
    assert isinstance(got, Live)
