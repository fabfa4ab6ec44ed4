r"""Normalising a request body before it is compared with a recorded one.

What changes between two runs of the same agent must not count as a difference (per harness:
docs/record-strict-diff.md):
- tool-call and item ids (the harness echoes ids the model made up; Codex mints fresh item ids):
  each distinct id becomes <id:1>, <id:2>, ... in order of first appearance;

which fields hold ids, and which markers are dropped, each API says in its row (`Fields`, made by
proxy.apis.fields_of from the table and handed to the comparison);
- JSON text inside tool-call arguments: parsed, so key order and whitespace do not count;
- per-run session fields at the top level (prompt_cache_key, client_metadata, metadata, user) and
  transport fields (stream, stream_options);
- markers that move between runs (a cache marker put on the newest message on every turn) and
  per-item metadata a harness adds for its own backend: dropped;
- whatever the user masks with --mask REGEX (dates, temporary paths, ...): each match becomes
  <masked>, except a group named `keep`, which stays: `(?P<keep>Today's date is )\S+` masks the
  date only. (A look-behind does the same, but Python searches for it at every position, which
  made masking a long prompt seven times slower.)

Prompts a harness sends itself (the task, a follow-up, a text observation) are compared as
`prompt` text: masked, with whitespace runs squashed, since harnesses re-wrap and trim what they
echo back.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from proxy.nesting import embedded

VOLATILE_TOP_KEYS = frozenset(
    {"prompt_cache_key", "client_metadata", "metadata", "user", "stream", "stream_options"}
)
ARGUMENT_KEYS = frozenset({"arguments"})
MASK = "<masked>"
KEEP = "keep"


def mask_text(text: str, masks: Sequence[re.Pattern[str]]) -> str:
    """Each match of each mask becomes <masked>, but for its `keep` group."""
    for mask in masks:
        replacement, needle = _how(mask)
        if needle in text:  # a request holds hundreds of short texts: most never match
            text = mask.sub(replacement, text)
    return text


_LITERAL_TEXT = r"(?:[^\\()\[\]{}.*+?^$|]|\\[^A-Za-z0-9])+"
_LITERAL = re.compile(_LITERAL_TEXT)
_LITERAL_KEEP = re.compile(rf"\(\?P<{KEEP}>({_LITERAL_TEXT})\)")
_ESCAPED = re.compile(r"\\(.)")


@functools.lru_cache(maxsize=1024)
def _how(mask: re.Pattern[str]) -> tuple[str, str]:
    """The replacement for a mask, and text every match of it holds ("" when unknown): the
    literal `keep` group it starts with."""
    if KEEP not in mask.groupindex:
        whole = _LITERAL.fullmatch(mask.pattern)  # a value masked as it is (a harness's folder)
        return MASK, _ESCAPED.sub(r"\1", mask.pattern) if whole else ""
    found = _LITERAL_KEEP.match(mask.pattern)
    needle = _ESCAPED.sub(r"\1", found.group(1)) if found else ""
    return rf"\g<{KEEP}>{MASK}", needle


def compile_masks(patterns: Sequence[str]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


Canonical = Callable[[str], str]


@dataclass(frozen=True, slots=True)
class Fields:
    """The field names a comparison treats apart, as the APIs' rows say: those holding ids
    (numbered in order of first appearance, below the top level), and those dropped wherever
    they are."""

    ids: frozenset[str] = frozenset()
    dropped: frozenset[str] = frozenset()


NO_FIELDS = Fields()  # every field compared as it is


def normalize(
    value: Any,
    masks: Sequence[re.Pattern[str]] = (),
    *,
    body: bool = True,
    canonical: Canonical | None = None,
    fields: Fields = NO_FIELDS,
) -> Any:
    """`body`: `value` is a whole request body, whose per-run top-level fields do not count.
    `canonical`: each text in one form before it is masked (a harness preset's list orders).
    `fields`: which hold ids, and which are dropped."""
    ids: dict[str, str] = {}
    if body and isinstance(value, dict):
        value = {k: v for k, v in value.items() if k not in VOLATILE_TOP_KEYS}
    walk, _ = _walker(masks, ids, fields, canonical)
    return walk(value, body)


@dataclass(frozen=True, slots=True)
class Part:
    """One top-level value of a body as it was normalised: its text (per item for a list), its
    normal form, and the id numbering before and after it."""

    raw: tuple[bytes, ...] | bytes | None  # None: a list known by its items themselves
    normal: Any
    ids_before: dict[str, str]
    ids_after: dict[str, str]
    items: tuple[Any, ...] | None = None  # a list's items, when they are shared (`seen_since`)


@dataclass(frozen=True, slots=True)
class Normalised:
    """A body's normal form, with what lets the next body of its session reuse it: each request of
    a long run repeats the whole history, so only the items that are new are walked again."""

    value: dict[str, Any]
    parts: dict[str, Part]
    rules: tuple[tuple[re.Pattern[str], ...], Canonical | None, Fields]
    size: int  # bytes of the text kept

    def sharing(self, other: Normalised) -> Normalised:
        """This body's parts holding `other`'s normal forms (equal to its own: the two bodies were
        compared equal), so that the next comparison finds the earlier items identical."""
        parts = {
            key: Part(
                part.raw, other.parts[key].normal, part.ids_before, part.ids_after, part.items
            )
            for key, part in self.parts.items()
        }
        return Normalised(self.value, parts, self.rules, self.size)


@dataclass(frozen=True, slots=True)
class Seen:
    """A body's top-level values as the next body of its session is checked against (each one's
    text, per item for a list; a shared list's items themselves), and how much of each the
    previous body held unchanged: its leading items for a list, 1 or 0 for any other value."""

    texts: dict[str, tuple[bytes, ...] | bytes | None]
    items: dict[str, tuple[Any, ...] | None]
    same: dict[str, int]


def seen_since(
    body: dict[str, Any],
    since: Normalised | None,
    *,
    shared: bool = False,
    fields: Fields = NO_FIELDS,
) -> Seen:
    """What of `body` is unchanged since `since`, the previous body of its session (under any
    rules: a text does not depend on them). `shared`: the body's list items may be the previous
    body's own objects (a recording's steps hold their common history once:
    proxy.formats.recording), known unchanged without a text."""
    old_parts = since.parts if since is not None else {}
    texts: dict[str, tuple[bytes, ...] | bytes | None] = {}
    items: dict[str, tuple[Any, ...] | None] = {}
    same: dict[str, int] = {}
    for key, item in body.items():
        if key in VOLATILE_TOP_KEYS or key in fields.dropped:
            continue
        old = old_parts.get(key)
        if isinstance(item, list):
            same[key], texts[key] = _unchanged(old, item, shared)
            items[key] = tuple(item) if shared else None
        else:
            texts[key] = text = orjson.dumps(item)
            same[key] = int(old is not None and old.raw == text)
    return Seen(texts, items, same)


def normalize_body(
    body: dict[str, Any],
    masks: Sequence[re.Pattern[str]] = (),
    *,
    canonical: Canonical | None = None,
    since: Normalised | None = None,
    seen: Seen | None = None,
    fields: Fields = NO_FIELDS,
) -> Normalised:
    """`normalize(body)`, walking only what is new since `since` (the session's previous body,
    under the same rules; `seen`: what of the body is unchanged since then, when it is known
    already): a top-level value whose text is unchanged, and the leading items of a list (the
    history) that are unchanged, keep their normal forms when the id numbering reached them in
    the same state. The result is always the one `normalize` gives."""
    seen = seen if seen is not None else seen_since(body, since, fields=fields)
    rules = (tuple(masks), canonical, fields)
    kept = since.parts if since is not None and since.rules == rules else {}
    ids: dict[str, str] = {}  # numbered in place: the walker holds it
    walk, under = _walker(masks, ids, fields, canonical)
    value: dict[str, Any] = {}
    parts: dict[str, Part] = {}
    size = 0
    for key, item in body.items():
        if key in VOLATILE_TOP_KEYS or key in fields.dropped:
            continue
        old = kept.get(key)
        before = dict(ids)
        n = seen.same[key] if old is not None and old.ids_before == before else 0
        normal: Any
        text = seen.texts[key]
        if isinstance(item, list):
            if old is not None and n > 0:
                _renumbered(ids, old.ids_after)
                normal = [*old.normal, *map(walk, item[n:])]
            else:
                normal = list(map(walk, item))
            size += sum(map(len, text)) if isinstance(text, tuple) else 0
            parts[key] = Part(text, normal, before, dict(ids), seen.items[key])
        else:
            if old is not None and n:
                _renumbered(ids, old.ids_after)
                normal = old.normal
            else:
                normal = under(key, item)
            size += len(text) if isinstance(text, bytes) else 0
            parts[key] = Part(text, normal, before, dict(ids))
        value[key] = normal
    return Normalised(value, parts, rules, size)


def _renumbered(ids: dict[str, str], now: dict[str, str]) -> None:
    """The numbering as it stood after a part kept from the previous body."""
    ids.clear()
    ids.update(now)


def _unchanged(
    old: Part | None, items: list[Any], shared: bool
) -> tuple[int, tuple[bytes, ...] | None]:
    """How many leading items of a list are unchanged: all of the earlier list's, when they are
    the list's first items; else none. And the items' texts, unless they were known unchanged by
    being the same objects."""
    if shared and old is not None and old.items is not None:
        n = len(old.items)
        if n <= len(items) and all(a is b for a, b in zip(old.items, items, strict=False)):
            return n, None
    raw = tuple(map(orjson.dumps, items))
    if old is None or not isinstance(old.raw, tuple):
        return 0, raw
    n = len(old.raw)
    return (n if n <= len(raw) and raw[:n] == old.raw else 0), raw


def prompt(text: str, masks: Sequence[re.Pattern[str]] = ()) -> str:
    """Text as compared when the harness sends it itself: masked, whitespace runs squashed."""
    return squash(mask_text(text, masks))


_SPACE = re.compile(r"\s+")


def squash(text: str) -> str:
    """Harnesses re-wrap and trim text they echo back; whitespace runs do not count."""
    return _SPACE.sub(" ", text).strip()


class _Walk(Protocol):
    def __call__(self, value: Any, top: bool = False) -> Any: ...


def _walker(
    masks: Sequence[re.Pattern[str]],
    ids: dict[str, str],
    fields: Fields,
    canonical: Canonical | None,
) -> tuple[_Walk, Callable[[str, Any], Any]]:
    """The walk of one body, with its rules and its id numbering (`ids`, filled as it goes)
    bound once rather than passed down every call: a late turn's body is tens of thousands of
    values. `walk(value, top)`: `top`, a body's top level, where id fields are ordinary fields;
    `under(key, item)`: a value under `key`, whose arguments' JSON text is walked as JSON."""
    dropped, id_keys = fields.dropped, fields.ids

    def walk(value: Any, top: bool = False) -> Any:
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if key in dropped:
                    continue
                if not top and key in id_keys and isinstance(item, str):
                    out[key] = ids.setdefault(item, f"<id:{len(ids) + 1}>")
                else:
                    out[key] = under(key, item)
            return out
        if isinstance(value, list):
            return [walk(item) for item in value]
        if isinstance(value, str):
            return mask_text(canonical(value) if canonical is not None else value, masks)
        return value

    def under(key: str, item: Any) -> Any:
        if key in ARGUMENT_KEYS and isinstance(item, str):
            return walk(_parsed(item))
        return walk(item)

    return walk, under


def _parsed(text: str) -> Any:
    value = embedded(text)  # None when not JSON (or "null"), or nested too deep to walk
    return text if value is None else value
