"""Every SQL statement the daemon runs lives in ``roost/state/store.py`` (schema, pragmas) or ``roost/state/repos/``.

Read from the modules' own source: any string literal (f-strings included) outside those homes
that reads like a statement fails the test, so a query cannot creep back into a service.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import roost

ROOT = Path(roost.__file__).resolve().parent
HOMES = ("state/store.py", "state/repos/")
STATEMENT = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+(OR\s+\w+\s+)?INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b", re.S)


def _literals(tree: ast.AST) -> list[tuple[int, str]]:
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    out: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            out.append((node.lineno, node.value))
        elif isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{}" for v in node.values)
            out.append((node.lineno, text))
    return out


def test_the_pattern_sees_the_statements_the_repositories_hold() -> None:
    for sql in (
        "SELECT * FROM jobs WHERE job_id = ?",
        "INSERT OR REPLACE INTO jobs (a) VALUES (?)",
        "UPDATE sessions SET job_id = ? WHERE session_id = ?",
        "DELETE FROM spent WHERE exp_ms <= ?",
    ):
        assert STATEMENT.search(sql), sql
    assert not STATEMENT.search("select a capsule from the registry")


def test_no_sql_outside_the_store_and_the_repositories() -> None:
    found: list[str] = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(HOMES):
            continue
        for line, text in _literals(ast.parse(path.read_text(), str(path))):
            if STATEMENT.search(text):
                found.append(f"roost/{rel}:{line}: {text.strip()[:60]}")
    assert found == [], "SQL outside roost/state/store.py and roost/state/repos/:\n" + "\n".join(found)
