"""Every setting is a `serve` flag, an environment variable and a row of the configuration page,
and every `serve` flag is a setting: the three are written in different places, so this holds
them together."""

from __future__ import annotations

import argparse

from proxy.cli import _parser
from proxy.config import ENV_PREFIX, Settings
from proxy.flags import TABLE_HEAD, table
from tests.conftest import ROOT


def serve_flags() -> dict[str, str]:
    """dest -> the flag, of `replay-proxy serve`."""
    serve = _parser().parse_known_args(["serve"])[0].usage_of
    assert isinstance(serve, argparse.ArgumentParser)
    return {
        a.dest: a.option_strings[-1]
        for a in serve._actions
        if a.option_strings and a.dest not in ("help", "usage_of")
    }


def test_every_flag_is_a_setting_and_every_setting_a_flag() -> None:
    flags = serve_flags()
    assert set(flags) == set(Settings.model_fields)


def test_the_configuration_page_lists_every_setting_by_flag_and_variable() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    flags = serve_flags()
    missing = [
        name
        for name in Settings.model_fields
        if flags[name] not in page or f"{ENV_PREFIX}{name.upper()}" not in page
    ]
    assert missing == [], missing


def test_the_configuration_pages_table_is_the_one_the_settings_make() -> None:
    """Each row (flag, variable, default, meaning) comes from its Settings field: the page is
    not written by hand, so it cannot drift from the flags."""
    page = (ROOT / "docs" / "configuration.md").read_text()
    start = page.index(TABLE_HEAD)
    written = page[start : page.index("\n\n", start) + 1]
    assert written == table(), "regenerate it: python -m proxy.flags (docs/development.md)"
