"""python -m tests.helpers.harness.newest [--cache DIR] [--only NAME ...] [--versions-only]

Runs the harness suite (`pytest -m harness`: the recipes, the strict presets, the bundled
examples, the harnesses' own logs, the faults) on the newest version of every harness the
registries have today, and says per harness which recipes or presets no longer give a clean
replay. It asks npm (`npm view PKG version`) and PyPI (https://pypi.org/pypi/PKG/json) for the
newest versions, installs them into a scratch cache (REPLAY_PROXY_HARNESS_CACHE, default
~/.cache/replay-proxy/harnesses-newest, kept between runs) and puts them in place of the newest
pins (REPLAY_PROXY_HARNESS_VERSIONS, read by versions.py); the oldest track is left out. Exit
status 0 when everything replays cleanly, 1 otherwise. Moving a pin is then an edit of versions.py
and of the docs' tested-versions table (tests/unit/test_harness_versions.py checks they agree).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.harness.versions import OVERRIDE, PINS

ROOT = Path(__file__).resolve().parents[3]
SCRATCH = Path.home() / ".cache/replay-proxy/harnesses-newest"

# what each harness test proves, as the report names it
CHECKS = {
    "test_harness_replays_the_script_for_real_then_continues_live": "recipe",
    "test_a_recorded_run_replays_strictly_elsewhere_and_later_on_presets_alone": "strict preset",
    "test_the_bundled_example_replays_with_no_model_and_nothing_to_warn_about": "bundled example",
    "test_a_harness_replays_its_own_log": "its own log",
    "test_the_harness_survives_a_429_and_a_cut_answer": "faults",
    "test_the_harness_retries_the_429_but_stops_on_a_cut_stream": "faults",
    "test_claude_code_agent_tool_spawns_a_child_whose_calls_go_upstream": "Agent subagent",
}
# tests with no harness in their id
MODULES = {"test_rounds": "opencode", "test_text_based": "mini", "test_rollout_url": "mini"}


def npm_newest(package: str) -> str:
    out = subprocess.run(
        ["npm", "view", package, "version"], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    return parse_npm(out)


def parse_npm(out: str) -> str:
    """`npm view PKG version` prints the version (the last line, after any npm notices)."""
    lines = [line.strip() for line in out.strip().splitlines() if line.strip()]
    if not lines:
        raise ValueError("npm printed no version")
    return lines[-1].strip("'\"")


def pypi_newest(package: str) -> str:
    import httpx

    answer = httpx.get(f"https://pypi.org/pypi/{package}/json", timeout=60, follow_redirects=True)
    answer.raise_for_status()
    return parse_pypi(answer.text)


def parse_pypi(text: str) -> str:
    return str(json.loads(text)["info"]["version"])


def newest_versions(
    names: list[str],
    npm: Callable[[str], str] = npm_newest,
    pypi: Callable[[str], str] = pypi_newest,
) -> tuple[dict[str, str], list[str]]:
    """Each harness's newest version, and notes where its packages disagree (OpenHands' two are
    released together; the first package's version is used)."""
    found: dict[str, str] = {}
    notes: list[str] = []
    for name in names:
        pin = PINS[name]
        ask = npm if pin.registry == "npm" else pypi
        versions = {package: ask(package) for package in pin.packages}
        found[name] = versions[pin.packages[0]]
        if len(set(versions.values())) > 1:
            notes.append(f"{name}: its packages' newest versions differ: {versions}")
    return found, notes


def harness_of(classname: str, test_id: str) -> str:
    """The harness a test case ran: from its id (`claude`, `agents-run`), else from its module."""
    if "[" in test_id:
        param = test_id[test_id.index("[") + 1 : -1].removesuffix("-oldest")
        if param.startswith("agents"):
            return "agents"
        if param.startswith("claude-"):  # Claude Code through Vertex AI or Bedrock
            return "claude"
        if param == "mini-text":
            return "mini"
        if param in PINS:
            return param
    return MODULES.get(classname.rsplit(".", 1)[-1], "other")


@dataclass
class Outcome:
    passed: int = 0
    skipped: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # "check (test id): first line of the reason"


def outcomes(junit_xml: str) -> dict[str, Outcome]:
    """Per harness, what its tests gave, from pytest's --junitxml report."""
    found: dict[str, Outcome] = {}
    for case in ET.fromstring(junit_xml).iter("testcase"):
        classname, test_id = case.get("classname", ""), case.get("name", "")
        function = test_id.split("[", 1)[0]
        outcome = found.setdefault(harness_of(classname, test_id), Outcome())
        label = f"{CHECKS.get(function, function)} ({test_id})"
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        skipped = case.find("skipped")
        if problem is not None:
            reason = (problem.get("message") or problem.text or "").strip().splitlines()
            outcome.failed.append(f"{label}: {reason[0][:200] if reason else 'failed'}")
        elif skipped is not None:
            outcome.skipped.append(f"{label}: {skipped.get('message', '')[:200]}")
        else:
            outcome.passed += 1
    return found


def report(pinned: dict[str, str], newest: dict[str, str], results: dict[str, Outcome]) -> str:
    lines = []
    for name in sorted(set(newest) | set(results)):
        outcome = results.get(name, Outcome())
        moved = newest.get(name, "")
        if name in newest and pinned.get(name, moved) != moved:
            moved = f"{pinned[name]} -> {moved}"
        if outcome.failed:
            verdict = f"NOT CLEAN: {len(outcome.failed)} of {outcome.passed + len(outcome.failed)}"
        elif outcome.passed:
            verdict = f"clean ({outcome.passed} tests)"
        else:
            verdict = "not run"
        lines.append(f"{name:10} {moved:22} {verdict}")
        lines += [f"    no longer clean: {f}" for f in outcome.failed]
        lines += [f"    skipped: {s}" for s in outcome.skipped]
    return "\n".join(lines)


def selection(only: list[str] | None) -> str:
    """pytest's -k for the newest run: the oldest track left out, and with `only` those harnesses'
    tests alone: their ids ([claude], [agents-run], ...: bracketed, as "mini" is in "gemini") and
    the modules that run one harness."""
    if not only:
        return "not oldest"
    words = [f"[{n}]" if n != "agents" else "[agents-" for n in only]
    if "claude" in only:  # and its runs through Vertex AI and Bedrock
        words += ["[claude-vertex]", "[claude-bedrock]"]
    words += [module for module, harness in MODULES.items() if harness in only]
    return f"({' or '.join(words)}) and not oldest"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.helpers.harness.newest")
    parser.add_argument("--cache", type=Path, default=SCRATCH, help="scratch install folder")
    parser.add_argument("--only", nargs="+", choices=sorted(PINS), help="these harnesses only")
    parser.add_argument(
        "--versions-only", action="store_true", help="print the newest versions, run nothing"
    )
    args = parser.parse_args(argv)
    names = args.only or sorted(PINS)
    newest, notes = newest_versions(names)
    pinned = {name: PINS[name].newest for name in PINS}
    for name in names:
        mark = "" if newest[name] == pinned[name] else "   (pinned: " + pinned[name] + ")"
        print(f"{name:10} newest {newest[name]}{mark}")
    for note in notes:
        print(note)
    if args.versions_only:
        return 0

    args.cache.mkdir(parents=True, exist_ok=True)
    junit = args.cache / "newest-report.xml"
    env = {
        **os.environ,
        "REPLAY_PROXY_HARNESS_CACHE": str(args.cache),
        OVERRIDE: " ".join(f"{name}={version}" for name, version in newest.items()),
        "REPLAY_PROXY_REQUIRE_HARNESSES": "1",  # a harness that cannot install is a failure
    }
    command = [sys.executable, "-m", "pytest", "-m", "harness", "-k", selection(args.only), "-q",
               "-p", "no:cacheprovider", f"--junitxml={junit}"]  # fmt: skip
    print("$", " ".join(command), flush=True)
    subprocess.run(command, cwd=ROOT, env=env, check=False)
    if not junit.exists():
        print("pytest wrote no report: see its output above")
        return 1
    results = outcomes(junit.read_text())
    if args.only:
        results = {name: outcome for name, outcome in results.items() if name in args.only}
    print()
    print(report(pinned, newest, results))
    clean = bool(results) and all(not o.failed for o in results.values())
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
