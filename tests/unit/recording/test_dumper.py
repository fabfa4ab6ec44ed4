"""--dump-dir: each live completion in a file of its own, named by a shared sequence that sorts
after the files already there, written whole (no temporary left), with no secret in it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proxy.recording.dumper import Dumper
from proxy.recording.recorder import REDACTED
from proxy.recording.tap import dump_record
from proxy.store.memory import MemoryStore

UPSTREAM_KEY = "sk-upstream-fedcba9876543210"


def record(content: str = "hello") -> dict[str, Any]:
    return {
        **dump_record(
            session="ses_1",
            parent=None,
            lane="main",
            turn=4,
            started=1_767_225_600.0,
            prefix=7,
            messages=[{"role": "user", "content": "hi"}],
        ),
        "response": {"choices": [{"message": {"role": "assistant", "content": content}}]},
    }


def listed(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


async def test_dumps_are_numbered_in_order_and_hold_the_record(tmp_path: Path) -> None:
    dumper = Dumper(tmp_path, MemoryStore().next_sequence)
    try:
        first = await dumper.write("ses_1", record("one"))
        second = await dumper.write("ses_2", record("two"))
    finally:
        dumper.close()
    assert (first.name, second.name) == ("0000000001-ses_1.json", "0000000002-ses_2.json")
    data = json.loads(first.read_text())
    assert data["response"]["choices"][0]["message"]["content"] == "one"
    assert listed(tmp_path) == [first.name, second.name]  # no temporary file left


async def test_after_a_restart_names_go_on_after_the_files_already_there(tmp_path: Path) -> None:
    (tmp_path / "0000000041-old.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("not a dump")
    (tmp_path / "12-short.json").write_text("{}")  # not ten digits: not one of ours
    dumper = Dumper(tmp_path, MemoryStore().next_sequence)
    try:
        path = await dumper.write("ses_1", record())
    finally:
        dumper.close()
    assert path.name == "0000000042-ses_1.json"


async def test_a_secret_is_never_written_into_a_dump(tmp_path: Path) -> None:
    dumper = Dumper(tmp_path, MemoryStore().next_sequence, secrets=(UPSTREAM_KEY, ""))
    try:
        path = await dumper.write("ses_1", record(f"the key was {UPSTREAM_KEY}"))
    finally:
        dumper.close()
    text = path.read_text()
    assert UPSTREAM_KEY not in text
    assert json.loads(text)["response"]["choices"][0]["message"]["content"] == (
        f"the key was {REDACTED}"
    )


async def test_a_session_that_is_no_file_name_is_refused(tmp_path: Path) -> None:
    dumper = Dumper(tmp_path, MemoryStore().next_sequence)
    try:
        with pytest.raises(ValueError, match="invalid name"):
            await dumper.write("../../etc/x", record())
    finally:
        dumper.close()


def test_a_dump_record_has_the_fields_training_pipelines_read() -> None:
    assert dump_record(
        session="ses_1",
        parent="ses_0",
        lane="subagent",
        turn=2,
        started=1_767_225_600.25,
        prefix=None,
        messages=[],
    ) == {
        "session_id": "ses_1",
        "parent_session_id": "ses_0",
        "lane": "subagent",
        "turn": 2,
        "timestamp": "2026-01-01T00:00:00.250Z",
        "replay_prefix_message_count": None,
        "messages": [],
    }
