"""Faults injected at a scripted turn: how a harness copes with rate limits, server errors, slow
answers and streams that break off, at the step of a recorded run the test chooses.

A fault names a turn, a kind and how many times it fires (default once). Requests of a session
that are due that turn get the fault until it has fired that often; then the turn is served
normally. The turn comes from the history as always, so a retried request is never given another
turn: it meets the same fault again, or the turn.

    429, 500, 503   an error in the API's own shape, with retry-after (SECONDS, default 1) and
                    without x-should-retry: false, so SDKs retry as against the real API
    drop            a stream cut after part of its events; a JSON answer closed with no body
    stall:SECONDS   headers and the first event, then nothing for that long, then the rest
    delay:SECONDS   the whole answer after that long

The plan comes from `serve --fault TURN:KIND[:SECONDS]` (every session) or the admin API (one
session: a JSON list of {"turn", "kind", "times", "seconds"}). Parsing and choosing are pure; the
answers themselves are made in proxy.http.faulted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator

MAX_SECONDS = 3600.0


class Kind(StrEnum):
    RATE_LIMITED = "429"
    SERVER_ERROR = "500"
    UNAVAILABLE = "503"
    DROP = "drop"
    STALL = "stall"
    DELAY = "delay"

    @property
    def status(self) -> int | None:
        """The HTTP status of an error kind; None for the kinds that shape the answer."""
        return int(self.value) if self.value.isdigit() else None

    @property
    def timed(self) -> bool:
        """Whether the kind needs seconds (how long): stall and delay."""
        return self in (Kind.STALL, Kind.DELAY)

    @property
    def spec(self) -> str:
        """As `--fault` takes it, after the turn: 429, drop, stall:SECONDS."""
        return f"{self.value}:SECONDS" if self.timed else self.value


ERRORS = tuple(kind for kind in Kind if kind.status is not None)
"""The kinds that answer an error instead of the turn: 429, 500, 503."""
SHAPES = tuple(kind for kind in Kind if kind.status is None)
"""The kinds that shape the answer: drop, stall, delay."""


def listed(words: Sequence[str]) -> str:
    """ "a, b or c", as help texts name the kinds."""
    *rest, last = words
    return f"{', '.join(rest)} or {last}" if rest else last


class Fault(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    turn: int = Field(ge=1)
    kind: Kind
    times: int = Field(default=1, ge=1, le=1000)
    seconds: float | None = Field(default=None, gt=0, le=MAX_SECONDS)

    @model_validator(mode="after")
    def _seconds_fit_the_kind(self) -> Fault:
        if self.kind.timed and self.seconds is None:
            raise ValueError(
                f"{self.kind.value} needs seconds (how long), e.g. {self.kind.value}:5"
            )
        if self.kind is Kind.DROP and self.seconds is not None:
            raise ValueError("drop takes no seconds")
        return self

    @property
    def label(self) -> str:
        """As the flag writes it, without the turn: 429, drop, stall:5."""
        if self.seconds is None:
            return self.kind.value
        return f"{self.kind.value}:{self.seconds:g}"

    @property
    def serves(self) -> bool:
        """Whether the request still gets its turn whole (late or slow), or not at all."""
        return self.kind.timed

    @property
    def retry_after(self) -> float:
        """An error's retry-after, in seconds."""
        return self.seconds if self.seconds is not None else 1.0

    def retry_headers(self) -> dict[str, str]:
        """retry-after in whole seconds for any client; retry-after-ms, which the OpenAI and
        Anthropic SDKs read first, for less than a second."""
        seconds = self.retry_after
        return {
            "retry-after": str(max(1, math.ceil(seconds))),
            "retry-after-ms": str(round(seconds * 1000)),
        }


_PLAN = TypeAdapter(list[Fault])


class FaultError(ValueError):
    """A fault spec that cannot be used, with the reason."""


def parse_flag(spec: str) -> Fault:
    """TURN:KIND[:SECONDS], as `serve --fault` takes it."""
    parts = spec.strip().split(":")
    if len(parts) not in (2, 3) or not parts[0].strip().isdigit():
        raise FaultError(
            f"{spec!r}: expected TURN:KIND[:SECONDS] (KIND one of {', '.join(Kind)}), "
            "e.g. 3:429 or 5:stall:10"
        )
    data: dict[str, Any] = {"turn": int(parts[0]), "kind": parts[1].strip()}
    if len(parts) == 3:
        try:
            data["seconds"] = float(parts[2])
        except ValueError:
            raise FaultError(f"{spec!r}: {parts[2]!r} is not a number of seconds") from None
    try:
        return Fault.model_validate(data)
    except ValidationError as exc:
        raise FaultError(f"{spec!r}: {_reason(exc)}") from None


def parse_plan(data: Any) -> tuple[Fault, ...]:
    """The admin API's JSON list; the first problem is the error, with where it is."""
    try:
        return tuple(_PLAN.validate_python(data))
    except ValidationError as exc:
        raise FaultError(_reason(exc)) from None


def due(plan: Sequence[Fault], fired: Sequence[int], turn: int) -> int | None:
    """The index of the fault that fires for a request due `turn`, given how often each fault of
    the plan has fired; None when none is left."""
    for index, fault in enumerate(plan):
        if fault.turn == turn and (fired[index] if index < len(fired) else 0) < fault.times:
            return index
    return None


def _reason(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"]).lstrip(".")
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message
