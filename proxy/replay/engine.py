"""The per-request decision, pure: (script, session flags, request) -> what the request gets.

Turn k is due when the request history holds exactly the first k scripted turns, matched by
tool-call id (text-only turns by their text), and, where a turn opens a later round, the
follow-up user messages the harness sent before it (in a text-based script the user messages
between turns are observations instead: proxy.replay.text_based). It is derived from the history,
never from a counter, so a retried or re-sent request gets the same turn again, and two concurrent
requests with the same history get the same turn. A session that branches at turn K holds only the
first K turns as its script: from there it goes live.

    Scripted(turn)   serve the turn
    Forward(reason)  send upstream (with the splice, once the script is used up)
    Stop             --after-script stop: the script is used up; answer a final text turn
    Diverged         answer an error naming the first difference
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from proxy.nesting import embedded
from proxy.replay.content import text_of
from proxy.replay.conversation import NO_ID, Conversation, Reply, path_of
from proxy.replay.difference import (
    Difference,
    around,
    excerpts,
    first_difference,
    first_mismatch,
    render,
)
from proxy.replay.normalize import NO_FIELDS, Fields, normalize, prompt, squash
from proxy.replay.presets import Preset
from proxy.replay.splice import Insertion, plan_splice
from proxy.replay.strict import StrictReplay
from proxy.replay.trajectory import Trajectory, Turn
from proxy.replay.volatile import CHANGED_VERDICT, VOLATILE, Verdict, judge


class DivergencePolicy(StrEnum):
    ERROR = "error"  # answer with an error naming the first difference
    LIVE = "live"  # forward this request and the rest of the session upstream


class ObservationPolicy(StrEnum):
    WARN = "warn"  # report it in the session status and the log
    LIVE = "live"  # the session goes live from there
    ERROR = "error"  # answer with an error naming the first difference


class AfterScript(StrEnum):
    LIVE = "live"  # forward to the upstream: the agent continues with the real model
    STOP = "stop"  # answer a final text turn: the agent halts, no model involved


class FailOn(StrEnum):
    ANY = "any"  # every divergence is one
    CHANGED = "changed"  # a volatile one (dates, temporary paths, ids) is noted and served


class Mode(StrEnum):
    RESUME = "resume"
    STRICT = "strict"


class ForwardReason(StrEnum):
    NO_SCRIPT = "no script"
    SCRIPT_DONE = "script used up"
    BRANCHED = "branch point reached"  # the first K turns of a longer script were served
    DIVERGED = "diverged"


@dataclass(frozen=True, slots=True)
class Rules:
    on_divergence: DivergencePolicy = DivergencePolicy.ERROR
    on_observation: ObservationPolicy = ObservationPolicy.WARN
    after_script: AfterScript = AfterScript.LIVE
    strict: StrictReplay | None = None  # set in --mode strict
    # requests outside the main lane compared with a recording's exchanges of their lane: in
    # strict mode, and in resume mode before a session's hand-off (proxy.http.recorded)
    recorded: StrictReplay | None = None
    masks: tuple[re.Pattern[str], ...] = ()
    fail_on: FailOn = FailOn.ANY
    fields: Fields = NO_FIELDS  # the APIs' id and dropped fields (proxy.apis.fields_of)


@dataclass(frozen=True, slots=True)
class Divergence:
    turn: int  # 1-based number of the turn (the step) the request disagrees at
    reason: str
    difference: Difference
    kind: str = "history"  # history | follow-up | observation | request | beyond
    verdict: Verdict = CHANGED_VERDICT

    @property
    def volatile(self) -> bool:
        return self.verdict.verdict == VOLATILE

    def describe(self) -> str:
        said = f"{self.reason}: {self.difference.describe()}"
        if self.volatile:
            return f"{said} [volatile: {self.verdict.flags()} would cover it]"
        return f"{said} [changed]"

    def as_dict(self) -> dict[str, object]:
        return {
            "turn": self.turn,
            "kind": self.kind,
            "reason": self.reason,
            **self.difference.as_dict(),
            **self.verdict.as_dict(),
        }


@dataclass(frozen=True, slots=True)
class Observations:
    """What the request's tool results say about the scripted calls."""

    returned: tuple[str, ...] = ()  # scripted call ids whose results the request holds
    divergence: Divergence | None = None  # a result that differs from the recorded output
    checked: int = 0  # the held turns whose results are now compared (proxy.replay.restore)


# Decisions are frozen, so these are shared: a frozen dataclass costs three times a plain one to
# make (object.__setattr__ per field), and most requests of an unscripted session get NO_SCRIPT.
NOTHING_SEEN = Observations()


@dataclass(frozen=True, slots=True)
class Scripted:
    turn: Turn
    total: int
    observations: Observations = NOTHING_SEEN
    volatile: Divergence | None = None  # --fail-on changed: a volatile divergence, served anyway


@dataclass(frozen=True, slots=True)
class Forward:
    reason: ForwardReason
    held: int = 0  # scripted turns the history holds
    splice: tuple[Insertion, ...] = ()
    divergence: Divergence | None = None  # set when the session goes live on a divergence
    observations: Observations = NOTHING_SEEN


@dataclass(frozen=True, slots=True)
class Stop:
    total: int
    observations: Observations = NOTHING_SEEN


@dataclass(frozen=True, slots=True)
class Diverged:
    divergence: Divergence
    total: int
    observations: Observations = NOTHING_SEEN


Decision = Scripted | Forward | Stop | Diverged
NO_SCRIPT = Forward(ForwardReason.NO_SCRIPT)
LIVE_AFTER_DIVERGENCE = Forward(ForwardReason.DIVERGED)


def decide(
    conv: Conversation,
    script: Trajectory | None,
    *,
    live_after_divergence: bool = False,
    rules: Rules = Rules(),
    body: Any = None,
    branch: int | None = None,
    preset: Preset | None = None,
    observed: int | None = None,
    session: str | None = None,
) -> Decision:
    """The decision for a main-lane request (tool-bearing, or the tool-less request of a
    text-based script's own conversation; never a subagent's). `branch`: the session replays only
    the first that many turns, then goes live. `observed`: the turns whose tool results earlier
    requests of the session compared already (None: only the newest turn's are compared).
    `session`: in strict mode, whose earlier steps the request's comparison may start from."""
    if script is None:
        return NO_SCRIPT
    if live_after_divergence:
        return LIVE_AFTER_DIVERGENCE
    turns = script.turns
    done = ForwardReason.SCRIPT_DONE
    if branch is not None and branch < len(turns):
        turns, done = turns[:branch], ForwardReason.BRANCHED
    total = len(turns)
    # a tool-calling request keeps the follow-up rules even against a script with no tool call
    text_based = script.text_based and not conv.takes_tools
    masks = rules.masks
    # the harness's own volatile values (its chunk ids, wall times, dates): in a tool result they
    # say nothing about the run, in resume mode too; in strict mode the history is judged with them
    observed_masks = masks
    if preset is not None:
        observed_masks = (*masks, *(rule.pattern for rule in preset.masks))
        if rules.strict is not None:  # the same patterns on both sides
            masks = observed_masks
    held, divergence, replies = match_history(
        conv, turns, masks, text_based=text_based, preset=preset
    )
    seen = NOTHING_SEEN
    if divergence is None:
        if text_based:  # the whole script's: the observation after turn K is recorded there
            seen = observe_text(conv, script.turns, held, replies, observed_masks, preset, observed)
        else:
            seen = observe(conv, script, held, observed_masks, preset, observed, rules.fields)
    judged = rules.on_observation is not ObservationPolicy.WARN and rules.strict is None
    tolerant = rules.fail_on is FailOn.CHANGED
    unlike = seen.divergence
    if divergence is None and unlike is not None and judged:
        divergence = None if tolerant and unlike.volatile else unlike
    volatile = None
    if divergence is None and rules.strict is not None:
        divergence = _strict_step(script, held, rules.strict, body, preset, session)
        if divergence is not None and tolerant and divergence.volatile:
            volatile, divergence = divergence, None
    if divergence is None and held < total:
        divergence = _missing_tool(conv, turns[held])
        if divergence is None:
            return Scripted(turns[held], total, seen, volatile)
    if divergence is not None:
        go_live = (
            rules.on_observation is ObservationPolicy.LIVE
            if divergence.kind == "observation"
            else rules.on_divergence is DivergencePolicy.LIVE
        )
        if go_live and rules.strict is None:
            return Forward(
                ForwardReason.DIVERGED,
                held,
                plan_splice(conv, replies, script, held),
                divergence,
                seen,
            )
        return Diverged(divergence, total, seen)
    if rules.after_script is AfterScript.STOP:
        return Stop(total, seen)
    return Forward(done, held, plan_splice(conv, replies, script, held), None, seen)


def match_history(
    conv: Conversation,
    turns: tuple[Turn, ...],
    masks: tuple[re.Pattern[str], ...] = (),
    *,
    text_based: bool = False,
    preset: Preset | None = None,
) -> tuple[int, Divergence | None, list[Reply]]:
    """How many scripted turns the history holds, the first disagreement if any, and the replies
    with each held turn in one piece (a Responses client may send a turn's calls apart, with
    results between them). Assistant messages after the last scripted turn are the live part.
    In a text-based script the user messages between turns are observations, not follow-ups:
    observe_text compares them."""
    replies = conv.replies
    out: list[Reply] = []
    follow_ups = not text_based
    r = 0
    for i, turn in enumerate(turns):
        if r >= len(replies):
            if follow_ups and turn.follow_up and out:  # the due turn opens a round
                divergence = _follow_up(conv, turn, out[-1], conv.message_count, masks, preset)
                if divergence is not None:
                    return i, divergence, out
            break
        reply = replies[r]
        if follow_ups and turn.follow_up and out:
            divergence = _follow_up(conv, turn, out[-1], reply.position, masks, preset)
            if divergence is not None:
                return i, divergence, [*out, *replies[r:]]
        calls = list(reply.calls)
        while (
            calls  # a turn split between its calls, never a separate message before them
            and len(calls) < len(turn.tool_calls)
            and r + 1 < len(replies)
            and replies[r + 1].calls
            and not replies[r + 1].text.strip()
            and replies[r + 1].calls[0].id == conv.wire_id(turn.tool_calls[len(calls)].id)
        ):
            r += 1
            calls.extend(replies[r].calls)
        if len(calls) != len(reply.calls):
            reply = Reply(
                reply.position, reply.path, reply.text, calls, reply.calls_path, replies[r].end
            )
        difference = _compare(reply, turn, conv.wire_id)
        if difference is not None:
            reason = f"the history's assistant message {i + 1} is not scripted turn {i + 1}"
            return i, Divergence(i + 1, reason, difference), out
        out.append(reply)
        r += 1
    return len(out), None, [*out, *replies[r:]]


def observe(
    conv: Conversation,
    script: Trajectory,
    held: int,
    masks: tuple[re.Pattern[str], ...],
    preset: Preset | None = None,
    observed: int | None = None,
    fields: Fields = NO_FIELDS,
) -> Observations:
    """Which scripted calls have results in the request, and whether those of the turns after
    the first `observed` match the recorded outputs (earlier ones were compared by earlier
    requests; None: the newest turn's only). A request that holds several turns no request showed
    before (a harness resumed with its history) has all of them compared, once. A value the
    harness states in an output (OpenHands' working directory) is masked in each output by that
    output's own."""
    if held == 0 or not conv.results:
        return NOTHING_SEEN
    results = {r.call_id: r for r in conv.results}
    wire_id = conv.wire_id
    if any(k.startswith(NO_ID) for k in results):  # an id-less call's result holds its stand-in
        for reply, turn in zip(conv.replies, script.turns[:held], strict=False):
            for got, call in zip(reply.calls, turn.tool_calls, strict=False):
                if got.id.startswith(NO_ID) and got.id in results:
                    results[wire_id(call.id)] = results[got.id]
    returned = tuple(
        c.id for t in script.turns[:held] for c in t.tool_calls if wire_id(c.id) in results
    )
    start = held - 1 if observed is None or not 0 <= observed < held else observed
    # a spawn whose output only names its child: checked by the child's own lane, not its text
    spawns = script.spawns_named_only if script.children else frozenset()
    for turn in script.turns[start:held]:
        for call in turn.tool_calls:
            result = results.get(wire_id(call.id))
            recorded = script.tool_outputs.get(call.id)
            if result is None or recorded is None or call.id in spawns:
                continue
            if preset is not None and preset.values:
                want = _output(recorded, (*preset.patterns(recorded), *masks), fields)
                got = _output(result.output, (*preset.patterns(result.output), *masks), fields)
            else:
                want, got = _output(recorded, masks, fields), _output(result.output, masks, fields)
            difference = first_difference(want, got, path_of(result.output_path))
            if difference is not None:
                reason = (
                    f"the result of {call.name} call {call.id} differs from the recorded output"
                )
                verdict = judge(want, got, path=path_of(result.output_path), preset=preset)
                divergence = Divergence(turn.number, reason, difference, "observation", verdict)
                return Observations(returned, divergence, held)
    return Observations(returned, None, held)


def observe_text(
    conv: Conversation,
    turns: tuple[Turn, ...],
    held: int,
    replies: list[Reply],
    masks: tuple[re.Pattern[str], ...],
    preset: Preset | None = None,
    observed: int | None = None,
) -> Observations:
    """A text-based script: the user message after each held turn is its observation, compared
    with the one recorded before the next turn of the whole script (a branch's cut included).
    Those after the first `observed` turns were compared by earlier requests (None: the newest
    only). After the script's last turn nothing was recorded: nothing is compared."""
    if held == 0:
        return NOTHING_SEEN
    start = held if observed is None or not 0 <= observed < held else observed + 1
    for k in range(max(start, 1), held + 1):  # the observation after turn k is turns[k]'s
        if k >= len(turns) or not turns[k].follow_up:
            continue
        before = replies[k].position if k < held and k < len(replies) else conv.message_count
        divergence = _follow_up(
            conv, turns[k], replies[k - 1], before, masks, preset, observation=True
        )
        if divergence is not None:
            return Observations((), divergence, held)
    return Observations((), None, held)


def _output(text: str, masks: tuple[re.Pattern[str], ...], fields: Fields) -> Any:
    """Tool output as compared: JSON output by value (its ids numbered as a request's are), text
    with the masks applied."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and (value := embedded(stripped)) is not None:
        return normalize(value, masks, body=False, fields=fields)
    return normalize(text, masks, body=False, fields=fields)


def _strict_step(
    script: Trajectory,
    held: int,
    strict: StrictReplay,
    body: Any,
    preset: Preset | None,
    session: str | None,
) -> Divergence | None:
    total = len(script.turns)
    if held >= total:
        return Divergence(
            held + 1,
            f"the run asked for step {held + 1} but {script.filename} holds only {total}; "
            "the agent is taking more steps than when this was recorded",
            Difference("", f"at most {total} steps", f"step {held + 1}"),
            "beyond",
        )
    recorded = script.turns[held].recorded
    if recorded is None:
        return None  # a plain trajectory has no recorded requests: only the history is checked
    difference = strict.compare(recorded, body, preset, session=session)
    if difference is None:
        return None
    verdict = strict.judge(recorded, body, preset)
    if verdict.changed_at is not None:  # the first difference that no mask explains
        difference = verdict.changed_at
    return Divergence(
        held + 1,
        f"the request differs from the recorded request of step {held + 1}",
        difference,
        "request",
        verdict,
    )


def _compare(reply: Reply, turn: Turn, wire_id: Callable[[str], str]) -> Difference | None:
    if turn.final:
        if reply.calls:
            ids = [c.id for c in reply.calls]
            return Difference(
                path_of(reply.calls_path), "no tool calls (a text-only turn)", render(ids)
            )
        want, got = squash(turn.text), squash(reply.text)
        if want != got:
            at = first_mismatch(want, got)
            return Difference(path_of((*reply.path, "content")), around(want, at), around(got, at))
        return None
    for j, call in enumerate(turn.tool_calls):
        if j >= len(reply.calls):
            return Difference(
                path_of((*reply.calls_path, j)),
                f'tool call "{wire_id(call.id)}" ({call.name})',
                "nothing (the call is missing)",
            )
        got_call = reply.calls[j]
        expected = wire_id(call.id)
        # the Gemini API does not require call ids: an id-less call is matched by its name
        if got_call.id != expected and not got_call.id.startswith(NO_ID):
            return Difference(path_of(got_call.id_path), render(expected), render(got_call.id))
        if got_call.name != call.name:
            return Difference(path_of(got_call.name_path), render(call.name), render(got_call.name))
    if len(reply.calls) > len(turn.tool_calls):
        extra = reply.calls[len(turn.tool_calls)]
        return Difference(
            path_of((*reply.calls_path, len(turn.tool_calls))),
            "nothing (no such call)",
            render(extra.id),
        )
    return None


def _follow_up(
    conv: Conversation,
    turn: Turn,
    answer: Reply,
    before: int,
    masks: tuple[re.Pattern[str], ...],
    preset: Preset | None = None,
    *,
    observation: bool = False,
) -> Divergence | None:
    """The user messages between the previous answer and `before` must be the recorded follow-up
    (or, in a text-based script, the recorded observation): the harness sends them itself, so they
    are compared, not spliced."""
    key = answer.path[0]  # messages | input
    got = conv.users_between(answer.end, before)
    want = [prompt(text_of(u.content), masks) for u in turn.follow_up]
    number = turn.number
    if observation:
        kind, number = "observation", turn.number - 1  # numbered as tool results are: by their turn
        reason = (
            f"the observation after scripted turn {turn.number - 1} (the user message the "
            "harness sent back) differs from the recorded one"
        )
    else:
        kind = "follow-up"
        reason = (
            f"the follow-up user message before scripted turn {turn.number} is not the recorded one"
        )
    if not got:
        difference = Difference(
            path_of((key, before)), render(want[0]), "nothing (no user message after the answer)"
        )
        return Divergence(number, reason, difference, kind)
    texts = [prompt(text, masks) for _, text in got]
    if len(texts) != len(want):  # a harness may join or split them: compare the whole prompt
        texts, want, got = [" ".join(texts)], [" ".join(want)], got[:1]
    for (pos, _), expected, sent in zip(got, want, texts, strict=True):
        if expected != sent:
            at = first_mismatch(expected, sent)
            difference = Difference(
                path_of((key, pos, "content")),
                around(expected, at),
                around(sent, at),
                excerpts(expected, sent),
            )
            verdict = judge(expected, sent, path=difference.path, preset=preset)
            return Divergence(number, reason, difference, kind, verdict)
    return None


def _missing_tool(conv: Conversation, turn: Turn) -> Divergence | None:
    # a set for many calls (a turn may make thousands against as many tools); one needs no set
    offered: Collection[str] = frozenset(conv.tools) if len(turn.tool_calls) > 1 else conv.tools
    for call in turn.tool_calls:
        if call.name not in offered:
            return Divergence(
                turn.number,
                f"scripted turn {turn.number} calls {call.name!r}, which the request does not offer",
                Difference("tools", f'a tool named "{call.name}"', render(list(conv.tools))),
            )
    return None
