"""docs/architecture.md is the map of the code: every module of proxy/ is named on it, so the map
cannot fall behind the code without this failing; and the layers it draws hold: no module imports
from a layer above its own."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT


def test_every_module_is_named_on_the_architecture_page() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    package = ROOT / "proxy"
    unnamed = []
    for module in sorted(package.rglob("*.py")):
        if module.name == "__init__.py" and module.parent != package:
            continue  # a folder's __init__ hands names on; the folder is named
        relative = module.relative_to(package).as_posix()
        if (
            relative not in page
            and f"`{module.name}`" not in page
            and f" {module.name}" not in page
        ):
            unnamed.append(relative)
    assert unnamed == [], f"not on docs/architecture.md: {unnamed}"


def test_every_folder_is_named_on_the_architecture_page() -> None:
    page = (ROOT / "docs" / "architecture.md").read_text()
    folders = [p.name for p in (ROOT / "proxy").iterdir() if (p / "__init__.py").exists()]
    assert folders and all(f"`{name}/`" in page for name in folders), folders


def test_the_runtime_holds_and_imports_nothing_from_http() -> None:
    """Runtime is a holder of the running proxy's parts: what a request gets is decided in
    serving/, and its I/O is done in http/; the runtime has no method of its own."""
    source = (ROOT / "proxy" / "runtime.py").read_text()
    assert "proxy.http" not in source
    [holder] = [n for n in ast.parse(source).body if isinstance(n, ast.ClassDef)]
    methods = [n.name for n in holder.body if isinstance(n, ast.FunctionDef)]
    assert methods == ["strict"], methods  # a property: which mode the rules are in


# each part of proxy/ and its layer: a module imports only from layers below its own (and its own
# folder), so the import graph has no cycles and no upward edge; docs/architecture.md draws it
LAYERS: dict[str, int] = {
    "proxy": 0,  # the package's own __init__: the version
    "errors": 0,
    "names": 0,
    "nesting": 0,
    "lineage": 0,
    "log_format": 0,
    "exits": 0,
    "replay": 1,
    "upstream": 1,
    "store": 1,
    "guard": 1,
    "offload": 3,
    "admin_token": 0,
    "apis": 2,
    "config": 2,
    "metrics": 2,
    "flags": 3,
    "serving": 3,
    "formats": 3,
    "sessions": 4,
    "recording": 5,
    "runtime": 6,
    "http": 7,
    "app": 8,
    "serve": 9,
    "testing": 9,
    "commands": 9,
    "cli": 10,
    "__main__": 11,
}


def _is_part(package: Path | None, name: str) -> bool:
    """`name` is a module or a folder of proxy/ (not a name the package's face hands on)."""
    root = package if package is not None else ROOT / "proxy"
    return (root / name).is_dir() or (root / f"{name}.py").exists()


def _imports(path: Path, package: Path | None = None) -> set[str]:
    """The parts of proxy/ a module imports from (by their top-level name under proxy), in every
    form: `import proxy.x`, `from proxy.x import y`, `from proxy import x` (a package's part by
    its name), a relative import (resolved against the module's own place under `package`), and
    `importlib.import_module("proxy.x")`."""
    here: list[str] = []
    if package is not None:
        relative = path.relative_to(package.parent).with_suffix("")
        here = list(relative.parts if path.name != "__init__.py" else relative.parts[:-1])
        if path.name != "__init__.py":
            here = here[:-1]  # a module's own package
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = here[: len(here) - (node.level - 1)] if node.level > 1 else here
                base = ".".join([*up, *([node.module] if node.module else [])])
            names = [base]
            if base == "proxy":  # from proxy import x: the part is x, if x is a part
                names = [
                    f"proxy.{alias.name}" if _is_part(package, alias.name) else "proxy"
                    for alias in node.names
                ]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names = [node.args[0].value]
        for name in names:
            parts = name.split(".")
            if parts[0] == "proxy":
                found.add(parts[1] if len(parts) > 1 else "proxy")
    return found


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    package = ROOT / "proxy"
    upward = []
    for module in sorted(package.rglob("*.py")):
        relative = module.relative_to(package)
        part = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        part = "proxy" if part == "__init__" else part
        assert part in LAYERS, f"proxy/{relative}: give {part} a layer in LAYERS"
        for target in _imports(module, package) - {part}:
            assert target in LAYERS, f"{target}: give it a layer in LAYERS"
            if LAYERS[target] >= LAYERS[part]:
                upward.append(f"proxy/{relative.as_posix()} imports {target}")
    assert upward == []


def test_the_layer_check_sees_an_upward_import(tmp_path: Path) -> None:
    """The check reads real import statements: an http import in a replay module is one."""
    module = tmp_path / "engine.py"
    module.write_text("from proxy.http.front import Front\nimport proxy.errors\n")
    assert _imports(module) == {"http", "errors"}
    assert LAYERS["http"] > LAYERS["replay"]


def test_the_layer_check_sees_every_import_form(tmp_path: Path) -> None:
    """A package imported by name, a relative import and importlib count as imports too."""
    package = tmp_path / "proxy"
    for part in ("replay", "http", "store"):
        (package / part).mkdir(parents=True)
    module = package / "replay" / "engine.py"
    module.write_text(
        "import importlib\nfrom proxy import http\nfrom ..sessions import registry\n"
        "from . import trajectory\nfrom .. import store\n"
        "importlib.import_module('proxy.recording.tap')\n"
    )
    found = _imports(module, package)
    assert found == {"http", "sessions", "replay", "store", "recording"}
