"""The docs show the code and stand alone: the code map in docs/architecture.md names
every module, rule and entry point; paths the docs name exist; no doc points outside
the repository."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"
#: What a reader of the repository alone cannot open.
OUTSIDE = re.compile(r"\.\./shared|/work/|\bDESIGN\.md\b|\bFACTS\.md\b")


def user_docs() -> list[Path]:
    return [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md")),
            *sorted((ROOT / "playbooks" / "roles").glob("*/README.md"))]


def code_map() -> set[str]:
    """``subpackage/module.py`` for each module line of the code map (the first code block)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = text.split("## Code map", 1)[1].split("```", 2)[1]
    found, package, sub = set(), "", ""
    for line in block.splitlines():
        if m := re.match(r"^(\w+)/\s", line):
            package, sub = m.group(1) + "/", ""
        elif m := re.match(r"^  (\w+)/\s*$", line):
            sub = m.group(1) + "/"
        elif m := re.match(r"^  ([\w.]+\.(?:py|json))\s", line):
            found.add(package + m.group(1))
            sub = ""
        elif sub and (m := re.match(r"^    ([\w.]+\.(?:py|json))\s", line)):
            found.add(package + sub + m.group(1))
    return found


def test_the_code_map_names_every_module():
    modules = {str(p.relative_to(ROOT / "benchmatrix")) for p in (ROOT / "benchmatrix").rglob("*.py")
               if p.name != "__init__.py" or p.parent.name in ("benchmatrix", "workloads")}
    listed = {m.removeprefix("benchmatrix/") for m in code_map()}
    assert sorted(modules - listed) == [], "modules missing from the code map in docs/architecture.md"
    assert sorted(listed - modules - {"spec/spec.schema.json"}) == [], "code map names modules that do not exist"


def test_the_diagram_names_every_rule_and_script():
    text = ARCHITECTURE.read_text(encoding="utf-8")
    diagram = text.split("```mermaid", 1)[1].split("```", 1)[0]
    rules = {m.group(2) for f in (ROOT / "workflow" / "rules").glob("*.smk")
             for m in re.finditer(r"^(rule|checkpoint) (\w+):", f.read_text(), re.M)}
    assert rules, "no rules found"
    for rule in rules:
        assert f"{rule}" in diagram and f"scripts/{rule}.py" in diagram, rule
        body = re.search(rf"execute\.(\w+)\.{rule}\b", diagram)
        assert body, f"the diagram names no execute.MODULE.{rule}"
        assert hasattr(importlib.import_module(f"benchmatrix.execute.{body.group(1)}"), rule), body.group(0)
    for script in (ROOT / "scripts").glob("*.py"):
        assert f"scripts/{script.name}" in diagram, script.name


@pytest.mark.parametrize("doc", user_docs(), ids=lambda p: str(p.relative_to(ROOT)))
def test_docs_stand_alone(doc: Path):
    hits = [f"{doc.relative_to(ROOT)}:{i}: {line.strip()}"
            for i, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1) if OUTSIDE.search(line)]
    assert hits == [], "references outside the repository:\n" + "\n".join(hits)


#: A repository path in backquotes: benchmatrix/..., tests/..., playbooks/..., workflow/..., scripts/...
REPO_PATH = re.compile(r"`((?:benchmatrix|tests|playbooks|workflow|scripts|config|bench|profiles)/[\w./-]+)`")


@pytest.mark.parametrize("doc", [ROOT / "docs" / "architecture.md", ROOT / "docs" / "contributing.md"],
                         ids=lambda p: p.name)
def test_paths_the_docs_name_exist(doc: Path):
    """Paths written out in full (no NAME-style placeholder) exist in the repository."""
    missing = []
    for path in REPO_PATH.findall(doc.read_text(encoding="utf-8")):
        path = path.rstrip(".")
        if re.search(r"[A-Z]{2,}|\*", path):  # placeholders: knob_NAME, TOOL.py, test_*.py
            continue
        if not (ROOT / path).exists():
            missing.append(path)
    assert missing == []
