"""docs/architecture.md is the map of the code: every module of proxy/ is named on it, so the map
cannot fall behind the code without this failing."""

from __future__ import annotations

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
    """Runtime is a holder of the running proxy's parts; request logic lives in http/."""
    source = (ROOT / "proxy" / "runtime.py").read_text()
    assert "proxy.http" not in source
