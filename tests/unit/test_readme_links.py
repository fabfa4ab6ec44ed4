"""Every link of the README to a file of the repository leads to one: the README is read on the
forge, where mkdocs --strict does not check it (it once linked docs/logs/, long gone)."""

from __future__ import annotations

import re

from tests.conftest import ROOT

LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def test_the_readmes_links_lead_to_files_that_exist() -> None:
    text = (ROOT / "README.md").read_text()
    targets = [t for t in LINK.findall(text) if "://" not in t and not t.startswith("mailto:")]
    assert targets, "the README links to no file"
    missing = [t for t in targets if not (ROOT / t).exists() or (ROOT / t).is_dir()]
    assert missing == [], f"README.md links to what is not a file: {missing}"
