"""Loading: a trajectory file of any supported format -> Trajectory, the format told apart by the
file's shape (sniffing), not by its name. Pure apart from `load_file` and `load_all`.

The formats, each a Reader (harness_logs/reader.py: tell its shape apart, turn it into chat
messages, or build its trajectories), tried in this order:

- a recording (what --record-dir writes: one exchange per line, formats/recording.py), read into
  turns that carry their recorded exchanges (RECORDINGS);
- the harnesses' own logs, each in its own module of harness_logs/, in the order of their table
  (READERS, in harness_logs/__init__.py): a file of several trajectories (NeMo-Gym rollouts)
  gives one per line;
- the generic shapes (generic.py): a bare list of chat messages or of another API's ("chat",
  "responses", "anthropic"), an object shaped like an API's request, {"messages": [...]},
  an llm_completions dump, JSONL of messages (GENERIC).

A directory is read as an event store (OpenHands SDK): its `events/*.json` (or `*.json`) files in
name order, as one JSON list. A JSONL file cut off mid-line loads what is complete, with a warning.
Every error is a LoadError naming the file and the message index; a file of no known shape gets one
error naming every format tried and why the closest one did not fit.
"""

from __future__ import annotations

import dataclasses
import gc
import hashlib
import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import orjson

from proxy.apis import APIS, BY_NAME, Api
from proxy.errors import LoadError
from proxy.formats.chat import trajectory_from_messages
from proxy.formats.children import with_children
from proxy.formats.generic import GENERIC, api_of
from proxy.formats.harness_logs import READERS, Converted, Lines, Misfit, Opened, Reader
from proxy.formats.recording import RECORDINGS
from proxy.names import inside
from proxy.nesting import TOO_DEEP, too_deep
from proxy.replay.trajectory import Note, Trajectory

log = logging.getLogger("proxy.formats")

LEFT_OUT = "left out: "  # starts the note of a conversation of the file that could not be read

__all__ = [
    "LEFT_OUT",
    "READERS",
    "LoadError",
    "api_of",
    "load_all",
    "load_bytes",
    "load_file",
    "load_many",
    "read_with",
    "trajectory_name",
]


def load_file(
    path: Path, *, name: str | None = None, apis: Mapping[str, Api] = BY_NAME
) -> Trajectory:
    """The one trajectory in a file (a file of several is an error saying so)."""
    return _one(load_all(path, name=name, apis=apis), str(path))


def load_all(
    path: Path, *, name: str | None = None, apis: Mapping[str, Api] = BY_NAME
) -> list[Trajectory]:
    """Every trajectory in a file, or in an event-store directory. `apis`: the APIs, by name, a
    recording's exchanges may have been made in (the table; a test adds one of its own)."""
    if path.is_dir():
        doc, data = _directory(path)
        opened = Opened(name or path.name, str(path), _digest(data), [], apis)
        return _guarded(lambda: _first_fit(doc, opened, lines=False))
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise LoadError(str(path), None, f"cannot read: {exc.strerror or exc}") from None
    found = load_many(data, name=name or trajectory_name(path), filename=str(path), apis=apis)
    if len(found) == 1:  # a run's own log: its subagents' transcripts may be kept beside it
        found = [with_children(path, found[0], lambda p, n: load_file(p, name=n, apis=apis))]
    return found


def trajectory_name(path: Path) -> str:
    """NAME for NAME.json / NAME.jsonl / NAME.traj / NAME.traj.json."""
    for suffix in (".jsonl", ".json", ".traj"):
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            return trajectory_name(Path(path.name.removesuffix(suffix)))
    return path.name


def load_bytes(
    data: bytes, *, name: str, filename: str, apis: Mapping[str, Api] = BY_NAME
) -> Trajectory:
    return _one(load_many(data, name=name, filename=filename, apis=apis), filename)


def load_many(
    data: bytes, *, name: str, filename: str, apis: Mapping[str, Api] = BY_NAME
) -> list[Trajectory]:
    return _guarded(lambda: _load(data, name=name, filename=filename, apis=apis))


def read_with(reader: Reader, data: bytes, *, name: str, filename: str) -> list[Trajectory]:
    """The trajectories in `data` as one format reads them, whatever the others would say: each
    format's tests read their files through its own reader with this."""

    def read() -> list[Trajectory]:
        digest = _digest(data)
        if reader.lines:
            items, notes = _lines(data, filename)
            return _read(reader, items, Opened(name, filename, digest, notes, BY_NAME))
        doc = _shallow(orjson.loads(data), filename, None)
        return _read(reader, doc, Opened(name, filename, digest, [], BY_NAME))

    return _guarded(read)


def _guarded(load: Callable[[], list[Trajectory]]) -> list[Trajectory]:
    # A large file allocates a few hundred thousand objects that all stay alive: the cyclic
    # collector would walk them again and again for nothing (a third of the load time at 10 MB).
    collecting = gc.isenabled()
    gc.disable()
    try:
        return load()
    finally:
        if collecting:
            gc.enable()


def _one(found: list[Trajectory], filename: str) -> Trajectory:
    if len(found) != 1:
        raise LoadError(
            filename,
            None,
            f"holds {len(found)} trajectories ({', '.join(t.name for t in found[:3])}, ...), "
            "where one is expected: pass it with --trajectory or --trajectory-dir (each is "
            "loaded by its own name), or split it with `replay-proxy convert`",
        )
    return found[0]


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _directory(path: Path) -> tuple[list[Any], bytes]:
    """An event store: one JSON event per file, in the order of the numbers in their names
    (event-00000-..., event-100000-...: the padding stops at five digits)."""
    folder = path / "events" if (path / "events").is_dir() else path
    files = sorted(
        (p for p in folder.iterdir() if p.suffix == ".json" and p.is_file()), key=_natural
    )
    if not files:
        raise LoadError(str(path), None, f"a directory, but {folder} holds no .json event files")
    doc: list[Any] = []
    chunks: list[bytes] = []
    for position, file in enumerate(files):
        if not inside(path, file):  # a link to a file elsewhere is not read
            raise LoadError(
                str(path),
                position,
                f"{file.relative_to(path)} is a symbolic link that leads out of the event store; "
                "links are not followed out of it",
            )
        try:
            data = file.read_bytes()
            doc.append(_shallow(orjson.loads(data), str(path), position))
        except OSError as exc:
            raise LoadError(str(path), position, f"{file.name}: cannot read: {exc}") from None
        except orjson.JSONDecodeError as exc:
            raise LoadError(str(path), position, f"{file.name} is not valid JSON: {exc}") from None
        chunks.append(data)
    return doc, b"\n".join(chunks)


def _shallow(value: Any, filename: str, index: int | None) -> Any:
    """`value`, unless it nests deeper than proxy.nesting allows (it could not be served)."""
    if too_deep(value):
        raise LoadError(filename, index, f"holds {TOO_DEEP}")
    return value


def _natural(path: Path) -> list[tuple[int, str]]:
    return [(int(part), "") if part.isdigit() else (-1, part) for part in _DIGITS.split(path.name)]


_DIGITS = re.compile(r"(\d+)")


def _load(data: bytes, *, name: str, filename: str, apis: Mapping[str, Api]) -> list[Trajectory]:
    digest = _digest(data)
    if not data.strip():
        raise LoadError(filename, None, "the file is empty")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as whole_error:
        items, notes = _lines(data, filename, whole_error)
        return _first_fit(items, Opened(name, filename, digest, notes, apis), lines=True)
    _shallow(doc, filename, None)
    return _first_fit(doc, Opened(name, filename, digest, [], apis), lines=False)


def _first_fit(doc: Any, opened: Opened, *, lines: bool) -> list[Trajectory]:
    """The file read by the first format it fits: a recording, then a harness log, then a
    generic shape (`lines`: `doc` is a JSONL file's lines)."""
    misses: list[tuple[str, Misfit]] = []
    for reader in (*RECORDINGS, *READERS):
        if reader.lines is not lines:
            continue
        miss = reader.miss(doc)
        if miss is None:
            return _read(reader, doc, opened)
        misses.append((reader.name, miss))
    return _generic(doc, misses, opened, lines=lines)


def _read(reader: Reader, doc: Any, opened: Opened) -> list[Trajectory]:
    """A file of `reader`'s format: its trajectories as the reader builds them, or its
    conversations made trajectories by the script rules."""
    if reader.build is not None:
        return reader.build(doc, opened)
    assert reader.convert is not None  # a Reader has one of the two (checked when it is made)
    return _converted(reader, reader.convert(doc, opened.filename), opened)


def _converted(reader: Reader, conversations: list[Converted], opened: Opened) -> list[Trajectory]:
    name, filename, digest, notes = opened.name, opened.filename, opened.digest, opened.notes
    out: list[Trajectory] = []
    refused: list[tuple[str | None, str]] = []  # (label, why), in file order
    for c in conversations:
        if c.refused is not None:
            refused.append((c.label, c.refused))
            continue
        messages, indexes = c.messages, c.indexes
        if c.system is not None and not any(m.get("role") == "system" for m in messages[:1]):
            messages, indexes = [{"role": "system", "content": c.system}, *messages], [-1, *indexes]
        try:
            t = trajectory_from_messages(
                messages,
                name=name if c.label is None else f"{name}.{c.label}",
                filename=filename,
                fmt=c.format or reader.name,
                digest=digest if c.label is None else _digest(f"{digest}:{c.label}".encode()),
                indexes=indexes,
                places=c.places,
                unit=c.unit or ("line" if reader.lines else "message"),
            )
        except LoadError as exc:
            if c.label is None:  # the file's only conversation
                raise
            # one of several (a rollout per line): the others still load
            where = (c.places or {}).get(exc.index) if exc.index is not None else None
            refused.append((c.label, f"{where or f'line {c.label}'}: {exc.reason}"))
            continue
        out.append(dataclasses.replace(t, skipped=(*notes, *c.left_out, *t.skipped)))
    if not out:
        if refused:
            reasons = "; ".join(why for _, why in refused[:3])
            more = f" (and {len(refused) - 3} more)" if len(refused) > 3 else ""
            raise LoadError(filename, None, f"no conversation in it could be read: {reasons}{more}")
        raise LoadError(filename, None, f"a {reader.name} file, but it holds no conversation")
    if refused:  # told once, with the first conversation of the file, and in the log
        left = [Note(-1, f"{LEFT_OUT}{why}", f"line {label}") for label, why in refused]
        out[0] = dataclasses.replace(out[0], skipped=(*left, *out[0].skipped))
        for _, why in refused:
            log.warning("%s: left out: %s", filename, why)
    return out


def _generic(
    doc: Any, misses: list[tuple[str, Misfit]], opened: Opened, *, lines: bool
) -> list[Trajectory]:
    """The first generic shape the file fits (proxy.formats.generic), once no harness log did;
    an error of its reading, or none fitting, is told with every format tried. `lines`: `doc`
    is a JSONL file's lines."""
    for reader in GENERIC:
        if reader.lines is not lines or reader.miss(doc) is not None:
            continue
        try:
            return _read(reader, doc, opened)
        except LoadError as exc:
            raise _unrecognised(exc, misses) from None
    raise _unrecognised(LoadError(opened.filename, None, _UNRECOGNISED), misses)


def _unrecognised(exc: LoadError, misses: list[tuple[str, Misfit]]) -> LoadError:
    """The generic shapes' error stands for a file that looked like one of them (it failed past
    its start) and like no harness log; otherwise one error names every format tried, the
    closest first."""
    ranked = sorted(misses, key=lambda m: -m[1].closeness)  # stable: READERS order among equals
    near = bool(ranked) and ranked[0][1].closeness > 0
    if not near and exc.index not in (None, 0):
        return exc
    if exc.reason == _UNRECOGNISED:
        why = "not a list of messages or an object holding one"
    else:
        why = exc.reason if exc.index is None else f"message {exc.index} {exc.reason}"
    tried = [f"{_BARE}: {why}"]
    tried += [f"{name}: {miss.reason}" for name, miss in ranked]
    if near:  # the closest harness log leads, then the generic shapes, then the rest
        name, miss = ranked[0]
        tried = [f"closest is {name}, which does not fit: {miss.reason}", tried[0], *tried[2:]]
    lead, *rest = tried
    also = f". Also tried {'; '.join(rest)}" if rest else ""
    return LoadError(
        exc.filename, None, f"not a trajectory in a format this proxy reads; {lead}{also}"
    )


def _either(words: list[str]) -> str:
    return ", ".join(words[:-1]) + f" or {words[-1]}" if len(words) > 1 else words[0]


# the generic shapes, named from the Api table: the bare lists of messages, then the objects
_BARE = _either(["chat", *(a.file.bare for a in APIS if a.file.bare)]) + " messages"
_UNRECOGNISED = (
    f"unrecognised trajectory format: expected a JSON array of {_BARE}; "
    + '{"messages": [...]}; '
    + "".join(f"{a.file.document}; " for a in APIS if a.file.document)
    + 'an llm_completions dump {"messages", "response"}; or JSONL with one message per line'
)


def _lines(
    data: bytes, filename: str, whole_error: orjson.JSONDecodeError | None = None
) -> tuple[Lines, list[Note]]:
    """The JSON values of a JSONL file's lines. A last line cut off mid-write (a harness or the
    recorder stopped: no newline ends the file) is left out with a warning; any other bad line is an
    error."""
    raw = data.splitlines()
    items: Lines = []
    notes: list[Note] = []
    for number, line in enumerate(raw):
        if not line.strip():
            continue
        try:
            items.append((number, _shallow(orjson.loads(line), filename, number)))
        except orjson.JSONDecodeError as exc:
            if not items:  # not JSONL either: report it as the JSON file it claims to be
                raise LoadError(filename, None, f"not valid JSON: {whole_error or exc}") from None
            if data.endswith((b"\n", b"\r")) or any(rest.strip() for rest in raw[number + 1 :]):
                raise LoadError(
                    filename, number, f"line {number + 1} is not valid JSON: {exc}"
                ) from None
            reason = (
                f"line {number + 1} is cut off (the file ends mid-line); loaded what is complete"
            )
            log.warning("%s: %s", filename, reason)
            notes.append(Note(number, reason, f"line {number + 1}"))
    if not items:
        raise LoadError(filename, None, "the file is empty")
    return items, notes
