"""The lists of modules in package docstrings are inventories: each names every module of its
folder and no module that is not there, compared as sets, so a list cannot drift from the
folder it describes."""

from __future__ import annotations

import ast
import fnmatch
import re

import pytest

from tests.conftest import ROOT

PACKAGES = sorted(
    p.parent for p in (ROOT / "proxy").rglob("__init__.py") if p.parent.name != "proxy"
)
LISTED = re.compile(r"^ {4}(\S+\.py)\b(.*)$", re.M)  # "    name.py   what it is"
NAMED = re.compile(r"\b([a-z_]+\.py)\b")


def listed(package_doc: str) -> set[str] | None:
    """The modules a docstring's list names (the first word of each line, and any module named
    on it, e.g. "framing.py ... eventstream.py: ..."), or None when it has no list."""
    lines = LISTED.findall(package_doc)
    if not lines:
        return None
    return {first for first, _ in lines} | {n for _, rest in lines for n in NAMED.findall(rest)}


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_a_packages_list_of_modules_is_its_folder(package: object) -> None:
    folder = package  # a Path
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""  # type: ignore[operator]
    names = listed(doc)
    if names is None:
        pytest.skip("its docstring lists no modules")
    modules = {p.name for p in folder.glob("*.py") if p.name != "__init__.py"}  # type: ignore[attr-defined]
    covered = {m for m in modules for n in names if fnmatch.fnmatch(m, n)}
    unknown = {n for n in names if not fnmatch.filter(modules, n)}
    assert (sorted(modules - covered), sorted(unknown)) == ([], [])


def test_the_inventory_check_sees_a_missing_and_a_stale_module() -> None:
    doc = "Parts:\n\n    a.py   one\n    b_*.py  the b's, and c.py too\n    gone.py  removed\n"
    names = listed(doc)
    assert names == {"a.py", "b_*.py", "c.py", "gone.py"}


def test_the_package_faces_drawing_names_only_what_is_there() -> None:
    """proxy/__init__.py draws a request's way through folders and modules: each it names
    exists (apis/<api>.py stands for every API module)."""
    doc = ast.get_docstring(ast.parse((ROOT / "proxy" / "__init__.py").read_text())) or ""
    doc = doc.split("The words", 1)[0]  # the drawing; the words point at docs/glossary.md
    named = set(re.findall(r"\b([a-z_]+/(?:[a-z_]+\.py)?)", doc))
    assert {"http/front.py", "serving/outcome.py", "store/"} <= named
    missing = [n for n in sorted(named) if not (ROOT / "proxy" / n).exists()]
    assert missing == [], missing
