"""The cut, where a resumed session meets the live model: the fence before it (--fence), its restore
verdict when the replay ends, and what a live call after it says (x-replay-handoff-turn,
x-replay-restore, and with --handoff-tokens the replayed prefix's token ids) or, with
--require-restored, its refusal. The rules themselves are proxy.replay.restore's, .tokens' and
proxy.sessions'; this is what a request does with them."""

from __future__ import annotations

import logging
from typing import Any

import orjson

from proxy.errors import Fenced, NotRestored
from proxy.http.inflight import InFlight
from proxy.lineage import Lineage
from proxy.recording.recorder import RawJson
from proxy.replay import restore
from proxy.replay.engine import Forward
from proxy.replay.tokens import PREFIX_FIELD
from proxy.replay.trajectory import Trajectory

# the APIs whose request body a token-in server reads the prefix from (NeMo RL's vLLM server:
# Chat Completions)
TOKEN_IN_APIS = frozenset({"chat"})

log = logging.getLogger("proxy.requests")


async def before_cut(call: InFlight, session: str) -> bool:
    """`session` (a call's own, or a child lane's root) has not been handed off yet: no main-lane
    call of it has gone live."""
    state = await call.runtime.store.get(session)
    return state is None or state.prefix_messages is None


def said(call: InFlight, lineage: Lineage | None) -> str:
    """The call, as a fenced refusal names it."""
    model = call.body.get("model") if isinstance(call.body, dict) else None
    text = f"the {call.lane} call {call.request.method} {call.request.path}"
    if isinstance(model, str):
        text += f" (model {model[:80]!r})"
    if lineage is not None:
        text += f" of {lineage.describe()}"
    return text


async def child_fenced(call: InFlight, root: str, decision: Forward) -> None:
    """--fence: a recorded child's lane that would go live before its root's hand-off is refused
    (the child's session says so), as any other call of the root would be."""
    if not call.runtime.settings.fence or not await before_cut(call, root):
        return
    text = said(call, call.lineage)
    error = Fenced(
        f"session {root} is fenced until its hand-off (--fence): {text}, whose recorded turns "
        f"are used up ({decision.reason}), would go upstream before the session's first live "
        "call",
        session=root,
        lane=str(call.lane),
        call=text,
    )
    await call.runtime.sessions.record_error(call.session, call.lane, error.message)
    await call.runtime.sessions.child_observed(root, None, refused=error.message)
    raise error


def settled(call: InFlight, verdict: dict[str, Any] | None) -> None:
    """The session's replay has ended: its restore verdict, said once in the log and counted."""
    assert verdict is not None
    if call.root is None:  # a child lane's own verdict is its root's business, not a session's
        call.runtime.metrics.restore(verdict["verdict"])
    log.info("session=%s %s", call.session, restore.describe(verdict))


def root_settled(call: InFlight, verdict: dict[str, Any] | None) -> None:
    """A child lane's end settled its root's verdict, which was waiting for it."""
    if verdict is not None and call.root is not None:
        call.runtime.metrics.restore(verdict["verdict"])
        log.info("session=%s %s", call.root, restore.describe(verdict))


def hand_off(call: InFlight, verdict: dict[str, Any], held_back: bool) -> None:
    """A live call after the replay: the client and the upstream are told where the run was cut
    and whether it was restored (x-replay-handoff-turn, x-replay-restore; {handoff_turn} and
    {restore} in --upstream-header), or, with --require-restored, the hand-off is refused."""
    if held_back:
        raise NotRestored(
            f"session {call.session} is not handed off to the live model: --require-restored, "
            f"and {restore.describe(verdict)}",
            session=call.session,
            **{"restore": verdict["verdict"], "first_mismatch": verdict.get("first_mismatch")},
        )
    turn, said = str(verdict["handoff_turn"]), str(verdict["verdict"])
    call.handoff = {"handoff_turn": turn, "restore": said}
    call.headers.append((b"x-replay-handoff-turn", turn.encode()))
    call.headers.append((b"x-replay-restore", said.encode()))


def with_prefix_tokens(
    call: InFlight, script: Trajectory | None, decision: Forward, verdict: dict[str, Any] | None
) -> None:
    """--handoff-tokens, on a session's first live Chat Completions call: the body gets the last
    replayed turn's recorded prompt and generation ids as `required_prefix_token_ids`, added to
    the bytes as they came (the body is not written again). Only for a restored session: else
    the live history holds other tool results than the recorded ids do. Said in
    x-replay-handoff-tokens: the count sent (0: none, and the log says why)."""
    if script is None or call.api.name not in TOKEN_IN_APIS:
        return
    prefix = script.prefix_tokens(decision.held)
    said = verdict["verdict"] if verdict is not None else restore.PENDING
    end = _closing_brace(call.raw)
    if said != restore.RESTORED:
        why = (
            f"the restore verdict is {said}: the live history is not what turn {decision.held} saw"
        )
    elif prefix is None:
        why = f"turn {decision.held} recorded no whole prompt and generation token ids"
    elif PREFIX_FIELD in call.body:
        why = f"the request has its own {PREFIX_FIELD}"
    elif end is None:
        why = "the body does not end as a JSON object does"
    else:
        head = end  # what comes before the closing brace, whitespace left out
        while call.raw[head - 1 : head].isspace():
            head -= 1
        empty = call.raw[head - 1 : head] == b"{"
        field = orjson.dumps(PREFIX_FIELD) + b":" + orjson.dumps(prefix)
        view = memoryview(call.raw)  # the body is copied once, into the new one
        call.raw = b"".join((view[:head], b"" if empty else b",", field, b"}"))
        if call.offloaded is None:
            call.body = {**call.body, PREFIX_FIELD: prefix}
        if call.tap is not None:
            call.tap.exchange.forwarded = RawJson(call.raw)
        call.headers.append((b"x-replay-handoff-tokens", str(len(prefix)).encode()))
        log.info(
            "session=%s hand-off: %d prefix token ids of turn %d sent as %s",
            call.session, len(prefix), decision.held, PREFIX_FIELD,
        )  # fmt: skip
        return
    log.warning("session=%s hand-off: no prefix token ids sent: %s", call.session, why)
    call.headers.append((b"x-replay-handoff-tokens", b"0"))


def _closing_brace(raw: bytes) -> int | None:
    """Where the body's closing brace is, when only whitespace follows it."""
    end = len(raw.rstrip()) - 1  # rstrip gives raw itself back when nothing trails
    return end if end > 0 and raw[end : end + 1] == b"}" else None
