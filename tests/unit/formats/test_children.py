"""A Claude Code transcript read with the children Claude Code keeps beside it (its own files from
2.1.197, tests/fixtures/harness_logs/claude-code), and a child file read wrongly failing loudly."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from proxy.errors import LoadError
from proxy.formats import load_file
from proxy.replay.trajectory import parent_of

FIXTURES = Path(__file__).parents[2] / "fixtures" / "harness_logs" / "claude-code"
AGENT = "a9aeb050a6110cc3d"


def layout(tmp_path: Path, *, meta: bool = True) -> Path:
    children = tmp_path / "sess" / "subagents"
    children.mkdir(parents=True)
    shutil.copy(FIXTURES / "session.jsonl", tmp_path / "sess.jsonl")
    shutil.copy(FIXTURES / "subagent.jsonl", children / f"agent-{AGENT}.jsonl")
    if meta:
        shutil.copy(FIXTURES / "subagent.meta.json", children / f"agent-{AGENT}.meta.json")
    return tmp_path / "sess.jsonl"


def test_the_child_beside_the_transcript_is_read_with_its_spawning_call(tmp_path: Path) -> None:
    alone = load_file(FIXTURES / "session.jsonl", name="sess")
    run = load_file(layout(tmp_path))
    [child] = run.children
    assert child.agent == AGENT and child.spawned_by == "toolu_cc_3"
    assert child.kind == "general-purpose" and not child.named_only  # its Agent result reports
    assert child.task == "Count the lines of existing.txt and report back."
    assert [len(t.tool_calls) for t in child.trajectory.turns] == [1, 0]
    assert child.trajectory.name == f"sess:agent-{AGENT}" and parent_of(child.trajectory.name) == (
        "sess",
        AGENT,
    )
    # the same turns as the file alone, and a digest that covers the child too
    assert [t.tool_calls for t in run.turns] == [t.tool_calls for t in alone.turns]
    assert run.digest != alone.digest and run.child(AGENT) is child
    assert run.summary()["children"][0]["spawned_by"] == "toolu_cc_3"


def test_a_child_without_its_meta_file_is_read_without_its_spawning_call(tmp_path: Path) -> None:
    [child] = load_file(layout(tmp_path, meta=False)).children
    assert child.spawned_by is None and child.kind is None


def test_a_broken_child_file_or_meta_file_fails_loudly(tmp_path: Path) -> None:
    path = layout(tmp_path)
    meta = tmp_path / "sess" / "subagents" / f"agent-{AGENT}.meta.json"
    meta.write_text('{"toolUseId": 3}')
    with pytest.raises(LoadError, match="toolUseId is not a string"):
        load_file(path)
    meta.write_text("not json")
    with pytest.raises(LoadError, match=r"meta\.json.*not a JSON object"):
        load_file(path)
    meta.unlink()
    (tmp_path / "sess" / "subagents" / f"agent-{AGENT}.jsonl").write_text('{"type": "user"}\n')
    with pytest.raises(LoadError, match=f"agent-{AGENT}.jsonl"):
        load_file(path)


def test_only_a_claude_code_transcript_looks_for_children(tmp_path: Path) -> None:
    (tmp_path / "run" / "subagents").mkdir(parents=True)
    shutil.copy(FIXTURES / "subagent.jsonl", tmp_path / "run" / "subagents" / "agent-x.jsonl")
    (tmp_path / "run.json").write_text('[{"role": "user", "content": "hi"}]')
    assert load_file(tmp_path / "run.json").children == ()


CODEX = FIXTURES.parent / "codex"
ROOT_THREAD = "01a242a7-9e44-7ae0-b0e0-0483f6f308a4"
CHILD_THREAD = "01a242a7-9efd-7de1-a4c7-85945523abdc"


def codex_day(tmp_path: Path, day: str = "04") -> Path:
    folder = tmp_path / "sessions" / "2026" / "12" / day
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def test_a_codex_childs_thread_is_read_from_its_own_rollout_by_the_spawn_output(
    tmp_path: Path,
) -> None:
    root = codex_day(tmp_path) / f"rollout-2026-12-04T20-03-20-{ROOT_THREAD}.jsonl"
    shutil.copy(CODEX / "rollout.jsonl", root)
    shutil.copy(
        CODEX / "subagent.jsonl", codex_day(tmp_path, "05") / f"rollout-y-{CHILD_THREAD}.jsonl"
    )
    [child] = load_file(root).children
    assert child.agent == CHILD_THREAD and child.spawned_by == "call_cx_3"
    assert child.named_only  # its spawn's output is only the new thread's id and nickname
    assert child.task == "Count the lines of existing.txt and report back."
    assert [len(t.tool_calls) for t in child.trajectory.turns] == [1, 0]


def test_a_codex_rollout_copied_without_its_childs_reads_without_the_child(
    tmp_path: Path,
) -> None:
    """Its spawn's note says where the child's rollout would be; its calls are not replayed."""
    root = codex_day(tmp_path) / f"rollout-2026-12-04T20-03-20-{ROOT_THREAD}.jsonl"
    shutil.copy(CODEX / "rollout.jsonl", root)
    run = load_file(root)
    assert run.children == () and run.digest == load_file(CODEX / "rollout.jsonl").digest
    notes = [n.reason for n in run.skipped]
    assert f"call call_cx_3 spawned a subagent thread: rollout-*-{CHILD_THREAD}.jsonl" in notes


def test_an_opencode_task_childs_session_is_read_from_its_export_beside_the_roots(
    tmp_path: Path,
) -> None:
    opencode = FIXTURES.parent / "opencode"
    root = tmp_path / "ses_dbd9a892affeyunXUMGhKtRPlg.json"
    shutil.copy(opencode / "session.json", root)
    alone = load_file(root)
    assert alone.children == ()  # exported alone: the task's child is not replayed
    shutil.copy(opencode / "subagent.json", tmp_path / "ses_dbd9a7ffbffeSj5kZfjh7ur0uY.json")
    [child] = load_file(root).children
    assert child.agent == "ses_dbd9a7ffbffeSj5kZfjh7ur0uY" and child.spawned_by == "call_oc_3"
    assert child.task == "Count the lines of existing.txt and report back." and not child.named_only


def test_children_that_cannot_be_replayed_are_left_out_with_a_note(tmp_path: Path) -> None:
    """A child's own child (spawnDepth 2), a file that links out of the run's folder: the run
    still loads, without them, and says so."""
    path = layout(tmp_path / "run")
    children = path.parent / "sess" / "subagents"
    shutil.copy(FIXTURES / "subagent.jsonl", children / "agent-b00000000000000b.jsonl")
    (children / "agent-b00000000000000b.meta.json").write_text(
        '{"toolUseId": "toolu_in_the_child", "agentType": "general-purpose", "spawnDepth": 2}'
    )
    outside = tmp_path / "elsewhere.jsonl"
    shutil.copy(FIXTURES / "subagent.jsonl", outside)
    (children / "agent-c00000000000000c.jsonl").symlink_to(outside)
    run = load_file(path)
    assert [c.agent for c in run.children] == [AGENT]
    [linked] = [n for n in run.skipped if "c00000000000000c" in n.reason]
    assert "leads out of" in linked.reason


def test_a_run_named_too_long_for_its_childrens_names_leaves_them_out(tmp_path: Path) -> None:
    path = layout(tmp_path)
    long = tmp_path / f"{'x' * 190}.jsonl"
    path.rename(long)
    (tmp_path / "sess").rename(tmp_path / ("x" * 190))
    run = load_file(long)
    assert run.children == ()
    assert any("longer than a name may be" in n.reason for n in run.skipped)
