"""The recorders of one `serve`'s workers (one instance id, one folder) write each run of a
session to one file, whichever of them writes each exchange; another proxy's recorder starts a
file of its own beside them. Two Recorder objects stand for two worker processes: what one knows
of the other's writing comes only from the files, as between processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from proxy.app import INSTANCE
from proxy.recording.recorder import INSTANCE_VARIABLE, Exchange, Recorder

TASK = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "List it."}]


def step(k: int, run: str) -> Exchange:
    """The k-th main-lane exchange of an agent loop (k = 0 starts it)."""
    history: list[Any] = list(TASK)
    for j in range(k):
        call = {
            "id": f"{run}{j}",
            "type": "function",
            "function": {"name": "ls", "arguments": "{}"},
        }
        history += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"{run}{j}", "content": "notes.txt"},
        ]
    call = {"id": f"{run}{k}", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    return Exchange(
        session="ses_w",
        lane="main",
        api="chat",
        method="POST",
        path="/v1/chat/completions",
        source="upstream",
        request={"model": "m", "messages": history},
        status=200,
        message={"role": "assistant", "content": None, "tool_calls": [call]},
    )


def calls(path: Path) -> list[str]:
    return [
        json.loads(line)["message"]["tool_calls"][0]["id"] for line in path.read_text().splitlines()
    ]


def test_the_variable_serve_sets_for_its_workers_is_the_one_the_recorder_reads() -> None:
    assert INSTANCE_VARIABLE == INSTANCE


async def test_two_workers_write_each_run_to_one_file_and_another_proxy_beside_them(
    tmp_path: Path,
) -> None:
    one, two = Recorder(tmp_path, instance="serve-1"), Recorder(tmp_path, instance="serve-1")
    other = Recorder(tmp_path, instance="serve-2")
    try:
        await one.write(step(0, "a"))
        await two.write(step(1, "a"))  # joins the run the other worker began
        await one.write(step(2, "a"))
        await two.write(step(0, "b"))  # starts over: knows the run stepped, from its own line
        await one.write(step(1, "b"))  # finds the newer file the other worker began
        await one.write(step(0, "c"))  # starts over again: knows, from the file, that b stepped
        await two.write(step(1, "c"))
        await other.write(step(0, "d"))  # another proxy: never joins this serve's run
    finally:
        for recorder in (one, two, other):
            recorder.close()
    assert calls(tmp_path / "ses_w.jsonl") == ["a0", "a1", "a2"]
    assert calls(tmp_path / "ses_w.2.jsonl") == ["b0", "b1"]
    assert calls(tmp_path / "ses_w.3.jsonl") == ["c0", "c1"]
    assert calls(tmp_path / "ses_w.4.jsonl") == ["d0"]
    runs = [
        {json.loads(line)["run"] for line in (tmp_path / name).read_text().splitlines()}
        for name in ("ses_w.jsonl", "ses_w.2.jsonl", "ses_w.3.jsonl", "ses_w.4.jsonl")
    ]
    assert [len(r) for r in runs] == [1, 1, 1, 1] and len(set.union(*runs)) == 4


async def test_a_session_id_of_the_longest_kind_gets_its_second_run_a_file_too(
    tmp_path: Path,
) -> None:
    """Session ids may be 200 characters long: the run number is no part of the id."""
    longest = "s" * 200
    recorder = Recorder(tmp_path)
    try:
        for k, run in ((0, "a"), (1, "a"), (0, "b")):
            x = step(k, run)
            x.session = longest
            await recorder.write(x)
    finally:
        recorder.close()
    assert calls(tmp_path / f"{longest}.jsonl") == ["a0", "a1"]
    assert calls(tmp_path / f"{longest}.2.jsonl") == ["b0"]
