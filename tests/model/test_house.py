"""The house rules that keep the code findable (issue 27): no constructor in src/ takes more
than 8 collaborators, JSON has one type alias (model/core/apijson.py), and every services job
says in its `__init__.py` what it owns and what it may import."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "nodelet"
MAX_COLLABORATORS = 8


def _sources() -> list[Path]:
    return [p for p in SRC.rglob("*.py") if "/gen/" not in str(p)]


def test_no_constructor_takes_more_than_8_collaborators() -> None:
    wide = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ClassDef):
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    count = len(item.args.args) - 1 + len(item.args.kwonlyargs)
                    if count > MAX_COLLABORATORS:
                        wide.append(f"{path.relative_to(SRC)}:{node.name} takes {count}")
    assert not wide, wide


def test_json_has_one_type_alias() -> None:
    alias = re.compile(r"^\w+(: TypeAlias)? = (dict|Mapping)\[str, Any\]$", re.M)
    found = sorted(f"{p.relative_to(SRC)}: {m.group(0)}" for p in _sources()
                   for m in alias.finditer(p.read_text()))
    assert found == ["model/core/apijson.py: JSON = Mapping[str, Any]",
                     "model/core/apijson.py: Obj = dict[str, Any]"], found


def test_every_services_job_says_what_it_owns_and_may_import() -> None:
    jobs = [p for p in (SRC / "services").iterdir() if p.is_dir() and p.name != "__pycache__"]
    assert len(jobs) >= 8
    for job in jobs:
        doc = ast.get_docstring(ast.parse((job / "__init__.py").read_text())) or ""
        assert "Owns:" in doc and "May import:" in doc, job.name
    flat = [p.name for p in (SRC / "services").glob("*.py") if p.name != "__init__.py"]
    assert flat == [], "services/ holds jobs, not modules"
