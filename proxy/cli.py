"""The command line: `replay-proxy serve | check | convert | diff | health`.

Only the parser and the dispatch live here, with nothing heavy imported at the top: `health` runs
as a container's probe every few seconds and must not load the server to ask /healthz. `serve` is
proxy.serve's.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from proxy.exits import EXIT_BAD_FILE, EXIT_USAGE

if TYPE_CHECKING:
    from proxy.replay.tokens import Tokens
    from proxy.replay.trajectory import Trajectory


def _parser() -> argparse.ArgumentParser:
    from proxy import __version__
    from proxy.flags import add_serve_flags
    from proxy.replay.engine import FailOn

    parser = argparse.ArgumentParser(
        prog="replay-proxy",
        description="An OpenAI-compatible proxy that replays saved agent trajectories.",
    )
    parser.add_argument("--version", action="version", version=f"replay-proxy {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser(
        "serve",
        help="run the proxy",
        argument_default=argparse.SUPPRESS,  # unset flags fall back to REPLAY_PROXY_* and defaults
        description="Each flag is also settable as REPLAY_PROXY_<FLAG_IN_CAPS>; lists comma-separated.",
    )
    add_serve_flags(serve)  # from the Settings fields (proxy.flags)

    check = commands.add_parser("check", help="describe what trajectory files will replay")
    check.add_argument("files", nargs="+", type=Path, metavar="FILE")
    check.add_argument("--json", action="store_true", help="print the description as JSON")
    convert = commands.add_parser(
        "convert",
        help="write trajectory files (any format, harness logs and recordings too) as chat JSON "
        "or as NeMo-Gym rollouts",
    )
    convert.add_argument("files", nargs="+", type=Path, metavar="FILE")
    convert.add_argument(
        "-o",
        "--out",
        type=Path,
        required=True,
        metavar="OUT",
        help="a folder, one NAME.json (NAME.jsonl) per trajectory; or a .json file for a single "
        "trajectory (with --to nemo-gym, a .jsonl file of one rollout per line)",
    )
    convert.add_argument(
        "--to",
        choices=["chat", "nemo-gym"],
        default="chat",
        help="chat: OpenAI chat messages (the default); nemo-gym: one NeMo-Gym rollout line per "
        "trajectory, with each call's recorded token ids and logprobs",
    )
    health = _health_arguments(
        commands.add_parser(
            "health", help="exit 0 when the proxy on this host answers /healthz (a HEALTHCHECK)"
        )
    )
    compare = commands.add_parser(
        "diff", help="compare two trajectories or recordings step by step"
    )
    compare.add_argument("a", type=Path, metavar="A")
    compare.add_argument("b", type=Path, metavar="B")
    compare.add_argument(
        "--mask", metavar="REGEX", action="append", default=[], help="ignore matches (repeatable)"
    )
    _mask_arguments(compare, default=True)
    compare.add_argument(
        "--fail-on",
        choices=[f.value for f in FailOn],
        default=FailOn.ANY.value,
        help="exit 1 on any difference (default), or only on a changed one",
    )
    masks = commands.add_parser("masks", help="masks for strict replay")
    masks_commands = masks.add_subparsers(dest="masks_command", required=True)
    suggest = masks_commands.add_parser(
        "suggest", help="the masks that make two recordings (or trajectories) of one run agree"
    )
    suggest.add_argument("a", type=Path, metavar="A")
    suggest.add_argument("b", type=Path, metavar="B")
    suggest.add_argument(
        "--mask", metavar="REGEX", action="append", default=[], help="already masked (repeatable)"
    )
    _mask_arguments(suggest, default=True)
    suggest.add_argument(
        "-o", "--out", type=Path, metavar="FILE", help="also write them as a file for --mask-file"
    )
    for command in (serve, check, convert, health, compare, suggest):
        command.set_defaults(usage_of=command)  # whose usage an unknown flag is told with
    return parser


def _mask_arguments(parser: argparse.ArgumentParser, *, default: bool = False) -> None:
    """--mask-file and --no-presets, for serve (settings: unset flags fall back to the
    environment) and the offline commands (plain defaults)."""
    extra: dict[str, Any] = {"default": []} if default else {}
    parser.add_argument(
        "--mask-file",
        metavar="FILE",
        action="append",
        type=Path,
        help="masks, one pattern per line (# comments), as masks suggest writes (repeatable)",
        **extra,
    )
    extra = {"default": True} if default else {}
    parser.add_argument(
        "--no-presets",
        dest="presets",
        action="store_false",
        help="do not apply the recognised harness's preset masks",
        **extra,
    )


def _health_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--url", help="default: http://127.0.0.1:PORT/healthz")
    where.add_argument(
        "--port", type=int, help="the proxy's port on this host (default $REPLAY_PROXY_PORT, 8080)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; Ctrl-C ends it quietly (130, as a shell reports SIGINT), and so does a
    reader that closes the pipe early (`replay-proxy check ... | head`).

    SIGINT gets its default meaning back first: a script's background job (`replay-proxy serve
    ... &`) starts with it ignored, and would lose every SIGINT until uvicorn took it over."""
    try:
        import signal
        import threading

        if threading.current_thread() is threading.main_thread():  # main() called in a thread
            signal.signal(signal.SIGINT, signal.default_int_handler)
        code = run(argv)
        sys.stdout.flush()  # here, where a closed pipe is caught, not at the interpreter's exit
        return code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # what is left in stdout's buffer would fail again at exit: hand it a sink instead
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports it


def run(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["health"]:  # a probe: answered without building the whole parser
        probe = _health_arguments(argparse.ArgumentParser(prog="replay-proxy health"))
        flags = probe.parse_args(argv[1:])
        return healthcheck(flags.url, flags.port)
    parser = _parser()
    parsed, unknown = parser.parse_known_args(argv)
    if unknown:  # said with the usage of the command it was given to, not the top level's
        parsed.usage_of.error(f"unrecognized arguments: {' '.join(unknown)}")
    args = vars(parsed)
    args.pop("usage_of")
    command = args.pop("command")
    if command == "check":
        return check(args["files"], as_json=args["json"])
    if command == "convert":
        return convert(args["files"], args["out"], args["to"])
    if command == "diff":
        masks = _patterns(args["mask"], args["mask_file"])
        if masks is None:
            return EXIT_USAGE
        return compare(
            args["a"], args["b"], masks, presets=args["presets"], fail_on=args["fail_on"]
        )
    if command == "masks":
        masks = _patterns(args["mask"], args["mask_file"])
        if masks is None:
            return EXIT_USAGE
        return suggest(args["a"], args["b"], masks, presets=args["presets"], out=args["out"])
    if command == "health":
        return healthcheck(args["url"], args["port"])
    from proxy.serve import serve

    return serve(args)


def check(files: Sequence[Path], *, as_json: bool = False) -> int:
    import orjson

    from proxy.errors import LoadError
    from proxy.formats import LEFT_OUT, load_all

    failed = False
    described: list[dict[str, Any]] = []
    for path in files:
        try:
            found = load_all(path)
        except LoadError as exc:
            print(str(exc), file=sys.stderr)
            failed = True
            if as_json:
                described.append({"source": str(path), "error": exc.reason, "index": exc.index})
            continue
        left = sum(n.reason.startswith(LEFT_OUT) for n in found[0].skipped)
        if left > len(found):  # most of a file of several conversations could not be read
            print(
                f"{path}: {left} of its {left + len(found)} conversations could not be read "
                "(see the notes of the first one)",
                file=sys.stderr,
            )
            failed = True
        for trajectory in found:
            if as_json:
                described.append(trajectory.summary())
            else:
                print(describe(trajectory, named=len(found) > 1))
            wrong = misread(trajectory)
            if wrong is not None:
                print(f"{trajectory.source}: {trajectory.name}: {wrong}", file=sys.stderr)
                failed = True
    if as_json:
        sys.stdout.write(orjson.dumps(described, option=orjson.OPT_INDENT_2).decode() + "\n")
    return EXIT_BAD_FILE if failed else 0


def convert(files: Sequence[Path], out: Path, to: str = "chat") -> int:
    from proxy.errors import LoadError
    from proxy.formats import load_all
    from proxy.formats.convert import report, write
    from proxy.formats.rollout import line

    loaded: list[Trajectory] = []
    failed = False
    for path in files:
        try:
            loaded += load_all(path)
        except LoadError as exc:
            print(str(exc), file=sys.stderr)
            failed = True
    if to == "nemo-gym" and out.suffix == ".jsonl" and not out.is_dir():
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(b"".join(line(t) for t in loaded))
        for t in loaded:
            print("\n".join(report(t, out)))
        return EXIT_BAD_FILE if failed else 0
    single = to == "chat" and out.suffix == ".json" and not out.is_dir()
    if single and len(loaded) > 1:
        print(
            f"replay-proxy: {out}: {len(loaded)} trajectories to write: give a folder",
            file=sys.stderr,
        )
        return EXIT_USAGE
    names: set[str] = set()
    for t in loaded:
        target = out if single else out / f"{t.name}.{'json' if to == 'chat' else 'jsonl'}"
        if t.name in names:
            print(f"replay-proxy: two trajectories are named {t.name!r}", file=sys.stderr)
            return EXIT_USAGE
        names.add(t.name)
        if to == "chat":
            write(t, target)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(line(t))
        print("\n".join(report(t, target)))
    return EXIT_BAD_FILE if failed else 0


def healthcheck(url: str | None, port: int | None = None) -> int:
    url = url or f"http://127.0.0.1:{port or os.environ.get('REPLAY_PROXY_PORT', '8080')}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=3) as answer:
            healthy = answer.status == 200
    except (OSError, ValueError) as exc:
        print(f"replay-proxy: {url}: {exc}", file=sys.stderr)
        return 1
    return 0 if healthy else 1


def _patterns(masks: Sequence[str], files: Sequence[Path]) -> list[re.Pattern[str]] | None:
    """--mask and --mask-file patterns, compiled; None (said on stderr) when one is bad."""
    from proxy.config import read_mask_file

    try:
        texts = [*masks, *(p for path in files for p in read_mask_file(path))]
        return [re.compile(text) for text in texts]
    except (re.error, ValueError) as exc:
        print(f"replay-proxy: a mask: {exc}", file=sys.stderr)
        return None


def _both(a: Path, b: Path) -> tuple[Trajectory, Trajectory] | None:
    from proxy.errors import LoadError
    from proxy.formats import load_file

    try:
        return load_file(a), load_file(b)
    except LoadError as exc:
        print(str(exc), file=sys.stderr)
        return None


def compare(
    a: Path,
    b: Path,
    masks: Sequence[re.Pattern[str]],
    *,
    presets: bool = True,
    fail_on: str = "any",
) -> int:
    from proxy.recording.diff import diff

    both = _both(a, b)
    if both is None:
        return EXIT_BAD_FILE
    findings = diff(*both, masks, presets=presets)
    for finding in findings:
        print(finding.report(str(a), str(b)))
    if not findings:
        print(f"{a} and {b} agree step for step")
    changed = [f for f in findings if not f.volatile]
    if findings and not changed:
        print(f"only volatile differences ({len(findings)}): values that change between runs")
    failed = changed if fail_on == "changed" else findings
    return EXIT_BAD_FILE if failed else 0


def suggest(
    a: Path, b: Path, masks: Sequence[re.Pattern[str]], *, presets: bool, out: Path | None
) -> int:
    from proxy.recording.suggest import mask_file
    from proxy.recording.suggest import suggest as suggested
    from proxy.replay.volatile import mask_flags

    both = _both(a, b)
    if both is None:
        return EXIT_BAD_FILE
    found = suggested(*both, masks, presets=presets)
    preset = f" on top of the {found.preset.name} preset" if found.preset else ""
    if not found.masks and not found.beyond:
        print(f"{a} and {b} agree step for step{preset}: no mask is needed")
        return 0
    if found.masks:
        print(f"A: {a}\nB: {b}\n{len(found.masks)} masks{preset} explain the differences:")
        for suggestion in found.masks:
            print(f"\n  {mask_flags([suggestion.pattern])}")
            for line in suggestion.comment():
                print(f"      {line}")
        print(f"\nflags: {mask_flags(s.pattern for s in found.masks)}")
        if out is not None:
            out.write_text(mask_file(found, str(a), str(b)), encoding="utf-8")
            print(f"written to {out} (give it to --mask-file)")
    if found.beyond:
        print(
            f"\n{len(found.beyond)} differences no mask can explain (another run, not a volatile value):"
        )
        for place in found.beyond[:20]:
            print(f"  {place}")
        if len(found.beyond) > 20:
            print(f"  ... and {len(found.beyond) - 20} more")
        return EXIT_BAD_FILE
    return 0


def _short(text: str, limit: int = 100) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _title(api: str) -> str:
    """An API's name as its row gives it."""
    from proxy.apis import BY_NAME

    return BY_NAME[api].title if api in BY_NAME else f"{api} API"


def misread(t: Trajectory) -> str | None:
    """Why a loaded trajectory is probably not the run its file records: most of its messages
    were dropped (a shape the rules do not fit; replaying it would go live at once)."""
    if t.read and 2 * len(t.dropped) > t.read:
        return (
            f"{len(t.dropped)} of its {t.read} messages were dropped, so the script is probably "
            "not the recorded run (a shape this proxy misreads): see the dropped notes above, "
            "and report the file"
        )
    return None


def _user(t: Trajectory, index: int) -> str:
    where = t.place(index)
    return f"user {where}" if where.startswith("message ") else f"user message at {where}"


def _tokens(tokens: Tokens) -> str:
    """What `check` says of a turn's recorded tokens."""
    said = []
    if tokens.generation is not None:
        said.append(f"{len(tokens.generation)} generated token ids")
    if tokens.prompt is not None:
        said.append(f"{len(tokens.prompt)} prompt ids")
    if tokens.generation_log_probs() is not None or tokens.entries is not None:
        said.append("logprobs")
    return f"{', '.join(said) or 'token fields'} ({tokens.style})"


def describe(t: Trajectory, *, named: bool = False) -> str:
    """What `check` prints of a trajectory; `named`: one of a file's several (rollouts), led by
    its own name (NAME.LINE), the one a request picks it by."""
    from proxy.replay.trajectory import not_served

    exchanges = f"{t.exchanges} exchange" + ("" if t.exchanges == 1 else "s")
    lines = [
        f"{t.source}: {t.name + ': ' if named else ''}{t.format}, {len(t.turns)} turns in "
        f"{exchanges}, "
        f"{t.tool_call_count} tool calls",
        f"  task: {_short(t.task) if t.task is not None else '(none: no user message)'}",
    ]
    if t.text_based:
        lines.append(
            "  text-based: no turn calls a tool (the harness reads its actions from the text); "
            "the user messages between turns are its observations, and only a tool-less request "
            "with this system prompt and task takes a turn"
        )
    for turn in t.turns:
        for user in turn.follow_up:
            if t.text_based:
                lines.append(
                    f"  {_user(t, user.index)} is the observation of turn {turn.number - 1} "
                    "(the harness sends it; compared, not spliced)"
                )
                continue
            lines.append(
                f"  {_user(t, user.index)} opens exchange {turn.exchange} "
                "(the harness sends it; compared, not spliced)"
            )
        for user in turn.users_before:
            lines.append(f"  {_user(t, user.index)} comes before turn {turn.number} (spliced live)")
        parts = [
            f"{len(turn.tool_calls)} tool call(s)"
            if turn.tool_calls
            else "text"
            if t.text_based
            else "text only, final"
        ]
        if turn.reasoning:
            parts.append("reasoning")
        if turn.tokens is not None:  # served with the turn (docs/rl-pipelines.md)
            parts.append(_tokens(turn.tokens))
        lines.append(f"  turn {turn.number} ({t.place(turn.index)}): {', '.join(parts)}")
        if turn.text:
            lines.append(f"    text: {_short(turn.text)}")
        for call in turn.tool_calls:
            lines.append(f"    {call.name} [{call.id}] {_short(call.arguments)}")
            for api, field, value in not_served(call):
                lines.append(
                    f"  warning: turn {turn.number}, call {call.id} ({call.name}): its {field} "
                    f"{_short(str(value), 60)!r} is served only over the {_title(api)}; served over "
                    "another API it is left out, and a harness that needs it to "
                    "dispatch the call refuses it"
                )
    for user in t.trailing_users:
        lines.append(f"  {_user(t, user.index)} trails the last turn (spliced live)")
    for child in t.children:
        lines.append(
            f"  subagent {child.agent} ({child.kind or 'agent'}, spawned by "
            f"{child.spawned_by or 'an unknown call'}): {len(child.trajectory.turns)} turns "
            f"replayed in its own lane, from {child.trajectory.source}; task: {_short(child.task or '')}"
        )
    for note in t.skipped:
        lines.append(f"  skipped {t.place_of_note(note)}: {note.reason}")
    for note in t.dropped:
        lines.append(f"  dropped {t.place_of_note(note)}: {note.reason}")
    if not t.turns:
        lines.append("  warning: no scripted turns; every request of its session goes upstream")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
