"""`python -m proxy`: the command line (proxy.cli.main), quiet on Ctrl-C from its first line.

`entry` gives SIGINT its default meaning back before the command line is imported (a script's
background job starts with it ignored, and an ignored signal is lost), and a Ctrl-C while it is
being imported ends it as one later does: 130, as a shell reports SIGINT, with no traceback.
"""

from __future__ import annotations


def entry() -> int:
    try:
        import signal

        signal.signal(signal.SIGINT, signal.default_int_handler)
        from proxy.cli import main
    except KeyboardInterrupt:
        return 130
    return main()


if __name__ == "__main__":
    raise SystemExit(entry())
