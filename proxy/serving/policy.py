"""What handling a request reads, decided from the settings and the request alone."""

from __future__ import annotations


def reads_preset(*, presets: bool, strict: bool, recording: bool, results: bool) -> bool:
    """Whether anything reads the harness's preset for this request: strict mode, recording,
    and a request carrying tool results (compared with its masks); never with --no-presets."""
    return presets and (strict or recording or results)
