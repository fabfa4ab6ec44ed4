"""Offload: the pure work of a request too large to do beside the event loop, in worker processes.

A thread keeps Python code from stopping the event loop, but not a C call that holds the GIL:
orjson reading 80 MB of small objects holds it about a second, a mask over a long text as long as
the text. So a body over --offload-bytes is never read in the serving process: a worker reads it
and hands back what serving needs to route it (`Examined`: the conversation and the body without
their history, the harness's preset), then, once the session's script is known, reads it again
and decides (`Decided`: the decision, and the body to forward when the splice changed it), or
matches it against recorded side exchanges (strict mode). What comes back is small; whatever a
request may hold in any size stays in the worker. Scripts go to a worker once, by digest.

The workers are started at the first such request (`spawn`: the serving process has threads),
and stopped with the app. Only the APIs of the table (proxy.apis.APIS) are read there.
"""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import gc
import itertools
import multiprocessing
import os
import signal
import sys
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from proxy.apis import BY_NAME, FIELDS, Api
from proxy.config import Settings
from proxy.replay.conversation import Conversation
from proxy.replay.engine import Decision, Forward, Rules, Scripted, decide
from proxy.replay.presets import PRESET_BY_NAME as PRESETS
from proxy.replay.presets import Preset, recognise
from proxy.replay.strict import Miss
from proxy.replay.trajectory import Trajectory, Turn

SCRIPTS_KEPT = 32  # in the worker, the least recently used going first
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Request:
    """A body as it came, and where it came: all a worker needs to read it."""

    api: str
    raw: bytes
    path: str
    query: str
    key: int = 0  # which request: the worker keeps the last one it read, to decide it unread


@dataclass(frozen=True, slots=True)
class Examined:
    conv: Conversation  # without replies, results and user messages: what routing reads
    shallow: dict[str, Any]  # the body without its history: what rendering reads
    replies: int  # assistant messages in the history
    results: bool  # the history holds tool results
    preset: Preset | None  # the harness the body says sent it (None with --no-presets)
    history: bytes | None  # the history as JSON, when asked for (a dump)


@dataclass(frozen=True, slots=True)
class Decided:
    decision: Decision
    raw: bytes | None  # the body to forward, when the splice or the cleaning changed it
    spliced: int  # user messages spliced in
    history: bytes | None  # the history forwarded, as JSON, when asked for (a dump)


@dataclass(frozen=True, slots=True)
class _Missing:
    digests: tuple[str, ...]  # scripts the worker does not hold: send them


class Offload:
    """The worker processes, and the calls that hand them a request."""

    def __init__(self, settings: Settings, *, limit: int | None = None) -> None:
        self.settings = settings
        self.limit = settings.offload_bytes if limit is None else limit
        self._pool: ProcessPoolExecutor | None = None
        self._keys = itertools.count(1)

    def request(self, api: Api, raw: bytes, path: str, query: str) -> Request:
        return Request(api.name, raw, path, query, next(self._keys))

    def takes(self, size: int, api: Api) -> bool:
        """A body this large, of an API the workers know, is read in a worker."""
        return 0 < self.limit < size and BY_NAME.get(api.name) is api

    async def examine(self, request: Request, *, user_agent: str, history: bool) -> Examined:
        examined: Examined = await self._call(_examine, request, user_agent, history)
        return examined

    async def decide(
        self,
        request: Request,
        script: Trajectory,
        *,
        live_after_divergence: bool,
        branch: int | None,
        preset: Preset | None,
        history: bool,
        observed: int | None = None,
        session: str | None = None,
    ) -> Decided:
        job = _DecideJob(
            request, script.digest, live_after_divergence, branch, preset.name if preset else None,
            history, observed, session,
        )  # fmt: skip
        decided: Decided = await self._with_scripts(_decide, job, [script])
        decision = decided.decision
        if isinstance(decision, Scripted):  # the turn came back as its number: it is the script's
            turn = script.turns[decision.turn.number - 1]
            decided = dataclasses.replace(
                decided, decision=dataclasses.replace(decision, turn=turn)
            )
        return decided

    async def matching(
        self, request: Request, scripts: Sequence[Trajectory], where: dict[str, Any]
    ) -> list[list[int]]:
        """Strict mode, outside the main lane: per script, its recorded exchanges of the lane
        whose request equals this one (proxy.replay.strict.StrictReplay.matching)."""
        job = _SideJob(request, tuple(s.digest for s in scripts), _where(where), closest=False)
        found: list[list[int]] = await self._with_scripts(_side, job, scripts)
        return found

    async def closest(
        self, request: Request, scripts: Sequence[Trajectory], where: dict[str, Any]
    ) -> list[Miss]:
        """Per script, its nearest recorded exchange of the lane (StrictReplay.closest)."""
        job = _SideJob(request, tuple(s.digest for s in scripts), _where(where), closest=True)
        misses: list[Miss] = await self._with_scripts(_side, job, scripts)
        return misses

    async def _with_scripts(self, work: Any, job: Any, scripts: Sequence[Trajectory]) -> Any:
        """`work(job, scripts sent)`: by digest first; the scripts a worker lacks, sent along."""
        result = await self._call(work, job, ())
        if isinstance(result, _Missing):
            wanted = [s for s in scripts if s.digest in result.digests]
            result = await self._call(work, job, tuple(wanted))
        assert not isinstance(result, _Missing)  # sent along: it holds them now
        return result

    async def _call(self, work: Any, *args: Any) -> Any:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                1,  # one: a request is decided where it was read, and such bodies are rare
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_start,
                initargs=(self.settings, os.getpid()),
            )
        return await asyncio.get_running_loop().run_in_executor(self._pool, work, *args)

    def close(self) -> None:
        """The workers stop once their current job is done (a job is bounded by one body)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _where(where: dict[str, Any]) -> tuple[str, str, str, str | None]:
    preset = where.get("preset")
    return where["lane"], where["method"], where["path"], preset.name if preset else None


@dataclass(frozen=True, slots=True)
class _DecideJob:
    request: Request
    digest: str
    live_after_divergence: bool
    branch: int | None
    preset: str | None
    history: bool
    observed: int | None = None  # the turns whose results were compared already
    session: str | None = None  # strict mode: whose earlier steps the comparison starts from


@dataclass(frozen=True, slots=True)
class _SideJob:
    request: Request
    digests: tuple[str, ...]
    where: tuple[str, str, str, str | None]  # lane, method, path, preset
    closest: bool


# --- in a worker process ---------------------------------------------------------------------

_SETTINGS: Settings | None = None
_RULES: Rules | None = None
_SCRIPTS: OrderedDict[str, Trajectory] = OrderedDict()


def _start(settings: Settings, parent: int) -> None:
    global _SETTINGS, _RULES
    _tied_to(parent)
    _SETTINGS, _RULES = settings, settings.rules(FIELDS)


def _tied_to(parent: int) -> None:
    """A worker ends with the process it works for, however that one ends (killed, it could not
    say so), and leaves Ctrl-C to it: the terminal sends SIGINT to the whole group."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform == "linux":  # the kernel sends SIGTERM when the parent dies
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() != parent:  # it died before the line above
        os._exit(0)


_PR_SET_PDEATHSIG = 1


def _read(request: Request) -> tuple[Api, dict[str, Any], Conversation]:
    """The request read: as it was when examined (the one last read is kept), else again."""
    global _LAST
    if _LAST is not None and _LAST[0] == request.key:
        read, _LAST = _LAST[1], None  # one request at a time: its memory goes with its answer
        return read
    api = BY_NAME[request.api]
    gc.disable()  # millions of objects that all stay alive: the collector would walk them again
    try:  # and again for nothing (as the loader does, formats/loading.py)
        body, conv = api.read(request.raw, request.path, request.query)
    finally:
        gc.enable()
    return api, body, conv


_LAST: tuple[int, tuple[Api, dict[str, Any], Conversation]] | None = None


def _examine(request: Request, user_agent: str, history: bool) -> Examined:
    global _LAST
    _LAST = None  # the last one read goes before this one is (no two at once in memory)
    api, body, conv = read = _read(request)
    _LAST = (request.key, read)
    assert _SETTINGS is not None
    preset = recognise(body, user_agent) if _SETTINGS.presets else None
    light = dataclasses.replace(conv, replies=[], results=[], users={})
    shallow = {k: v for k, v in body.items() if k != api.history}
    kept = orjson.dumps(body.get(api.history)) if history else None
    return Examined(light, shallow, len(conv.replies), bool(conv.results), preset, kept)


def _held(digests: Sequence[str], sent: Sequence[Trajectory]) -> list[Trajectory] | _Missing:
    for script in sent:
        _SCRIPTS[script.digest] = script
    while len(_SCRIPTS) > SCRIPTS_KEPT:
        _SCRIPTS.popitem(last=False)
    missing = tuple(d for d in digests if d not in _SCRIPTS)
    if missing:
        return _Missing(missing)
    for digest in digests:
        _SCRIPTS.move_to_end(digest)
    return [_SCRIPTS[d] for d in digests]


def _decide(job: _DecideJob, sent: Sequence[Trajectory]) -> Decided | _Missing:
    held = _held((job.digest,), sent)
    if isinstance(held, _Missing):
        return held
    [script] = held
    api, body, conv = _read(job.request)
    assert _RULES is not None
    preset = _preset(job.preset)
    decision = decide(
        conv,
        script,
        live_after_divergence=job.live_after_divergence,
        rules=_RULES,
        body=body if _RULES.strict is not None else None,
        branch=job.branch,
        preset=preset,
        observed=job.observed,
        session=job.session,
    )
    raw, spliced, history = None, 0, body.get(api.history)
    if isinstance(decision, Forward) and _RULES.strict is None:  # as completions prepares it
        assert _SETTINGS is not None
        tokens = script.tokens_upstream(_SETTINGS.handoff_tokens)
        live, spliced = api.live(body, decision.splice, tokens=tokens)
        if live is not None:
            raw, history = orjson.dumps(live), live.get(api.history)
    if isinstance(decision, Scripted):  # its turn goes back as its number: it is the script's
        number = decision.turn.number
        decision = dataclasses.replace(decision, turn=Turn(number, -1, "", None, ()))
    kept = orjson.dumps(history) if job.history else None
    return Decided(decision, raw, spliced, kept)


def _side(job: _SideJob, sent: Sequence[Trajectory]) -> list[list[int]] | list[Miss] | _Missing:
    held = _held(job.digests, sent)
    if isinstance(held, _Missing):
        return held
    _, body, _ = _read(job.request)
    assert _RULES is not None and _RULES.recorded is not None
    strict = _RULES.recorded
    lane, method, path, name = job.where
    preset = _preset(name)
    if job.closest:
        return [
            strict.closest(s.side, lane=lane, method=method, path=path, body=body, preset=preset)
            for s in held
        ]
    return [
        strict.matching(s.side, lane=lane, method=method, path=path, body=body, preset=preset)
        for s in held
    ]


def _preset(name: str | None) -> Preset | None:
    return PRESETS.get(name) if name is not None else None
