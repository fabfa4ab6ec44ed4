"""Validate the Kubernetes recipes without a cluster.

Checks every document of every deploy/kubernetes/*.yaml (or of the files and folders given) against
the Kubernetes OpenAPI schemas that the `kubernetes-validate` package ships, strictly (an unknown or
misspelled field is an error), for the oldest and the newest Kubernetes release the recipes target.
A duplicate key, a document that is not a named Kubernetes object, a kind the schemas do not know
and a file with no documents are errors too. Prints one line per document; exits 1 on any failure.

    pip install kubernetes-validate pyyaml
    python .ci/validate_kubernetes.py [FILE_OR_FOLDER...]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import yaml
from kubernetes_validate.utils import all_versions, major_minor

ROOT = Path(__file__).resolve().parent.parent
# 1.30: the oldest release meant (native sidecars are on by default from 1.29); 1.37: the newest
VERSIONS = ("1.30", "1.37")


class UniqueKeyLoader(yaml.SafeLoader):
    """PyYAML lets the last of two equal keys win silently; a manifest must not have any."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep)


def problem(doc: Any) -> str | None:
    """What is wrong with one document, or None when it is valid for every version."""
    if not isinstance(doc, dict) or not isinstance(doc.get("kind"), str):
        return "not a Kubernetes object (a mapping with apiVersion and kind)"
    if not isinstance(doc.get("metadata"), dict) or not doc["metadata"].get("name"):
        return "no metadata.name"
    for version in VERSIONS:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            return f"Kubernetes {version}: {exc.json_path}: {exc.message}"
        except (kubernetes_validate.SchemaNotFoundError, KeyError) as exc:
            return f"Kubernetes {version}: {getattr(exc, 'message', f'no {exc}')}"
    return None


def name(doc: Any) -> str:
    if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict):
        return f"{doc.get('kind')}/{doc['metadata'].get('name')}"
    return type(doc).__name__


def main(args: list[str]) -> int:
    shipped = {major_minor(v) for v in all_versions()}
    if missing := [v for v in VERSIONS if v not in shipped]:
        print(f"FAIL this kubernetes-validate has no schemas for Kubernetes {', '.join(missing)}")
        return 1
    paths = [Path(a).resolve() for a in args] or [ROOT / "deploy" / "kubernetes"]
    files = [f for p in paths for f in (sorted(p.iterdir()) if p.is_dir() else [p])]
    files = [f for f in files if f.suffix in (".yaml", ".yml") or f in paths]
    if not files:
        print(f"FAIL no *.yaml files in {', '.join(map(str, paths))}")
        return 1
    failures = valid = 0
    for file in files:
        shown = file.relative_to(ROOT) if file.is_relative_to(ROOT) else file
        try:
            with file.open() as stream:
                docs = [d for d in yaml.load_all(stream, Loader=UniqueKeyLoader) if d]
        except (OSError, yaml.YAMLError) as exc:
            print(f"FAIL {shown}: {exc}")
            failures += 1
            continue
        if not docs:
            print(f"FAIL {shown}: no documents")
            failures += 1
        for index, doc in enumerate(docs, 1):
            if error := problem(doc):
                print(f"FAIL {shown}: document {index} ({name(doc)}): {error}")
                failures += 1
            else:
                print(f"ok   {shown}: {name(doc)}")
                valid += 1
    versions = " and ".join(VERSIONS)
    print(
        f"{valid} documents valid, {failures} failures (Kubernetes {versions}, strict, "
        f"kubernetes-validate {kubernetes_validate.__version__})"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
