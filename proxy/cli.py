"""The command line: `replay-proxy serve | check | convert | diff | health`.

Only the parser and the dispatch live here, with nothing heavy imported at the top: `health` runs
as a container's probe every few seconds and must not load the server to ask /healthz. `serve` is
proxy.serve's, the other commands proxy.commands'; the flags of `serve` are made from the
settings (proxy.flags).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proxy.commands.health import healthcheck
from proxy.exits import EXIT_USAGE


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
    if command == "serve":
        from proxy.serve import serve

        return serve(args)
    from proxy.commands import check, convert, diff

    if command == "check":
        return check.check(args["files"], as_json=args["json"])
    if command == "convert":
        return convert.convert(args["files"], args["out"], args["to"])
    if command == "health":
        return healthcheck(args["url"], args["port"])
    masks = diff.patterns(args["mask"], args["mask_file"])
    if masks is None:
        return EXIT_USAGE
    if command == "diff":
        return diff.compare(
            args["a"], args["b"], masks, presets=args["presets"], fail_on=args["fail_on"]
        )
    return diff.suggest(args["a"], args["b"], masks, presets=args["presets"], out=args["out"])


if __name__ == "__main__":
    raise SystemExit(main())
