"""--record-dir: one JSON line per exchange, appended in order, and no secret the proxy knows ever
written, wherever it would appear."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxy.recording.recorder import (
    FORMAT_VERSION,
    REDACTED,
    Exchange,
    RawJson,
    Recorder,
    redact,
)

CLIENT_KEY = "sk-client-0123456789abcdef"
UPSTREAM_KEY = "sk-upstream-fedcba9876543210"


def exchange(**fields: object) -> Exchange:
    x = Exchange(
        session="ses_1",
        lane="main",
        api="chat",
        method="POST",
        path="/v1/chat/completions",
        source="upstream",
        request={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        status=200,
        content_type="application/json",
        response={"choices": [{"message": {"role": "assistant", "content": "hello"}}]},
        started=1_767_225_600.0,
    )
    for name, value in fields.items():
        setattr(x, name, value)
    return x


def test_every_occurrence_of_each_secret_is_redacted() -> None:
    data = f'{{"a": "{CLIENT_KEY}", "b": "Bearer {CLIENT_KEY}", "c": "{UPSTREAM_KEY}"}}'.encode()
    out = redact(data, [CLIENT_KEY, UPSTREAM_KEY])
    assert CLIENT_KEY.encode() not in out and UPSTREAM_KEY.encode() not in out
    assert out.count(REDACTED.encode()) == 3


def test_a_short_or_empty_secret_redacts_nothing() -> None:
    """A one-letter 'key' would otherwise wipe every such letter from the recording."""
    data = b'{"content": "a cat sat"}'
    assert redact(data, ["", "a", "cat"]) == data


def test_a_line_is_one_json_object_of_the_format_with_its_fields() -> None:
    line = exchange().line([])
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    data = json.loads(line)
    assert (data["type"], data["v"], data["session"], data["status"]) == (
        "exchange",
        FORMAT_VERSION,
        "ses_1",
        200,
    )
    assert "extra" not in data  # empty: left out
    assert json.loads(exchange(extra={"replayed_from": "d:3"}).line([]))["extra"] == {
        "replayed_from": "d:3"
    }


def test_a_secret_in_the_request_the_answer_or_an_error_is_never_written() -> None:
    x = exchange(
        request={
            "model": "m",
            "messages": [{"role": "user", "content": f"my key is {CLIENT_KEY}"}],
        },
        response={"error": {"message": f"Incorrect API key provided: {UPSTREAM_KEY}"}},
        error=f"upstream said 401 for {CLIENT_KEY}",
    )
    line = x.line([CLIENT_KEY, UPSTREAM_KEY])
    assert CLIENT_KEY.encode() not in line and UPSTREAM_KEY.encode() not in line
    assert json.loads(line)["request"]["messages"][0]["content"] == f"my key is {REDACTED}"


async def test_exchanges_are_appended_to_the_sessions_file_with_every_secret_scrubbed(
    tmp_path: Path,
) -> None:
    recorder = Recorder(tmp_path / "rec", secrets=[UPSTREAM_KEY, ""])
    try:
        await recorder.write(exchange(error=f"401 {UPSTREAM_KEY}"), secrets=(CLIENT_KEY,))
        await recorder.write(exchange(response={"echo": CLIENT_KEY}, status=201), (CLIENT_KEY,))
        await recorder.write(exchange(session="ses_2"))
    finally:
        recorder.close()
    first = (tmp_path / "rec" / "ses_1.jsonl").read_text()
    lines = [json.loads(line) for line in first.splitlines()]
    assert [x["status"] for x in lines] == [200, 201]
    assert UPSTREAM_KEY not in first and CLIENT_KEY not in first
    assert lines[1]["response"] == {"echo": REDACTED}
    assert (tmp_path / "rec" / "ses_2.jsonl").is_file()


async def test_a_link_put_in_place_of_a_sessions_file_is_never_written_through(
    tmp_path: Path,
) -> None:
    """The name is checked once; the file is opened without following a link, every time."""
    outside = tmp_path / "outside.jsonl"
    outside.write_text("")
    recorder = Recorder(tmp_path / "rec")
    try:
        await recorder.write(exchange())
        kept = tmp_path / "rec" / "ses_1.jsonl"
        kept.unlink()
        kept.symlink_to(outside)
        with pytest.raises((OSError, ValueError)):  # not opened, or found escaping
            await recorder.write(exchange(status=201))
    finally:
        recorder.close()
    assert outside.read_text() == ""


def test_a_session_that_is_no_file_name_is_refused(tmp_path: Path) -> None:
    recorder = Recorder(tmp_path)
    try:
        with pytest.raises(ValueError, match="invalid name"):
            recorder.path_for("../escape")
        assert recorder.path_for("ses_1") == tmp_path / "ses_1.jsonl"
    finally:
        recorder.close()


def test_a_body_kept_as_its_bytes_is_written_into_one_line_as_the_json_it_holds() -> None:
    """A request recorded as it came (read in a worker, or given a hand-off prefix) may be
    indented by its client: the line is still one line, and holds the same JSON."""
    indented = (
        b'{\n  "model": "m",\n  "messages": [\n    {"role": "user", "content": "a\\nb"}\n  ]\n}'
    )
    compact = b'{"model":"m","messages":[]}'
    line = exchange(request=RawJson(indented), forwarded=RawJson(compact)).line([])
    assert line.count(b"\n") == 1 and line.endswith(b"\n")
    data = json.loads(line)
    assert data["request"] == json.loads(indented)
    assert data["forwarded"] == {"model": "m", "messages": []}
