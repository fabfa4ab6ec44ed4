"""`serve`'s flags and the configuration page's table, both made from the Settings fields (each
declares its type, its default, its constraints and, in a Flag, its help and its page text): a
setting is declared once, in proxy/config.py, and is a flag, a REPLAY_PROXY_* variable and a row
of docs/configuration.md by that alone. tests/unit/test_settings_vocabulary.py holds the page to
the table made here."""

from __future__ import annotations

import argparse
import types
import typing
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from proxy.config import ENV_PREFIX, Flag, Settings

TABLE_HEAD = "| flag | variable | default | meaning |\n|---|---|---|---|\n"


def flag_of(info: FieldInfo) -> Flag:
    found = [m for m in info.metadata if isinstance(m, Flag)]
    if len(found) != 1:
        raise TypeError(f"a setting needs exactly one Flag: {info}")
    return found[0]


def _switch(info: FieldInfo) -> bool:
    return info.annotation is bool


def _listed(info: FieldInfo) -> type | None:
    """The item type of a list setting (tuple[X, ...]), else None."""
    if typing.get_origin(info.annotation) is tuple:
        return typing.get_args(info.annotation)[0]  # type: ignore[no-any-return]
    return None


def _plain(info: FieldInfo) -> Any:
    """The type a value is read as: an optional one's inner type."""
    kind = info.annotation
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        kind = next(a for a in typing.get_args(kind) if a is not type(None))
    return kind


def option(name: str, info: FieldInfo) -> str:
    """The flag a setting is given by: --no-NAME for a switch that is on by default."""
    dashed = name.replace("_", "-")
    return f"--no-{dashed}" if _switch(info) and info.default is True else f"--{dashed}"


def add_serve_flags(parser: argparse.ArgumentParser) -> None:
    """Every setting as a flag of `serve`; an unset flag is left out of the namespace
    (argument_default=SUPPRESS on the parser), so the environment and the default apply."""
    groups: dict[str, Any] = {}
    for name, info in Settings.model_fields.items():
        flag = flag_of(info)
        where: Any = parser
        if flag.group is not None:
            where = groups.get(flag.group) or groups.setdefault(
                flag.group, parser.add_argument_group(flag.group)
            )
        how: dict[str, Any] = {"dest": name, "help": flag.help}
        item = _listed(info)
        kind = _plain(info)
        if _switch(info):
            how["action"] = "store_false" if info.default is True else "store_true"
        elif item is not None:
            how.update(action="append", metavar=flag.metavar)
            if item is Path:
                how["type"] = Path
        elif isinstance(kind, type) and issubclass(kind, Enum):
            how["choices"] = [member.value for member in kind]
        else:
            how["metavar"] = flag.metavar
            if kind in (int, float, Path):
                how["type"] = kind
        where.add_argument(option(name, info), **how)


def _default(info: FieldInfo) -> str:
    flag = flag_of(info)
    if flag.default is not None:
        return flag.default
    value = info.default
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None or value == ():
        return "none"
    if isinstance(value, tuple):
        return ", ".join(f"`{v}`" for v in value)
    if isinstance(value, Enum):
        return f"`{value.value}`"
    if isinstance(value, float):
        return f"`{value:g}`"
    return f"`{value}`"


def table() -> str:
    """The configuration page's table of settings, a row per setting in their order."""
    rows = []
    for name, info in Settings.model_fields.items():
        flag = flag_of(info)
        given = option(name, info)
        if flag.metavar and not _switch(info):
            given += f" {flag.metavar}"
        variable = ENV_PREFIX + name.upper()
        if _switch(info) and info.default is True:
            variable += "=false"
        rows.append(f"| `{given}` | `{variable}` | {_default(info)} | {flag.doc} |\n")
    return TABLE_HEAD + "".join(rows)


if __name__ == "__main__":  # the table, for docs/configuration.md
    print(table(), end="")
