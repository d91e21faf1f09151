"""The checks that keep the marks of equivalent mutants true, run by ``python -m tools.mutation``
before it mutates anything and by tests/test_mutation_marks.py in the suite: every entry of
``equivalents.EQUIVALENT`` still quotes lines of its function, and every ``# pragma: no mutate``
in the code says why (a comment with "Equivalent mutant" above it in its function)."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from tools.mutation.equivalents import EQUIVALENT, Equivalent

PRAGMA = "# pragma: no mutate"
REASON = "Equivalent mutant"


def function_spans(tree: ast.Module) -> dict[str, tuple[int, int]]:
    """Each function's and method's first and last line, by the name mutmut's results give it
    ("function", "Class.method")."""
    spans = {}
    for node in tree.body:
        functions = [(node, node.name)] if isinstance(node, ast.FunctionDef) else []
        if isinstance(node, ast.ClassDef):
            functions = [
                (item, f"{node.name}.{item.name}")
                for item in node.body
                if isinstance(item, ast.FunctionDef)
            ]
        for function, name in functions:
            spans[name] = (function.lineno, function.end_lineno or function.lineno)
    return spans


def stale_entries(root: Path, entries: Iterable[Equivalent] = EQUIVALENT) -> list[str]:
    """What is wrong with each entry that no longer quotes its code: its module gone, its
    function gone, or its ``before`` lines not (one after another, stripped) in the function."""
    problems = []
    for entry in entries:
        where = f"{entry.module}, {entry.function}: {entry.before!r} -> {entry.after!r}"
        path = root / entry.module
        parts = Path(entry.module).parts
        if parts[0] == "features" and not (root / "features" / parts[1]).is_dir():
            continue  # a removed feature's: gone with its folder
        if not path.is_file():
            problems.append(f"{where}: no module {entry.module}")
            continue
        text = path.read_text()
        spans = function_spans(ast.parse(text, str(path)))
        if entry.function not in spans:
            problems.append(f"{where}: no function {entry.function} in {entry.module}")
            continue
        first, last = spans[entry.function]
        body = [line.strip() for line in text.splitlines()[first - 1 : last]]
        wanted = entry.before.split("\n")
        if not any(body[i : i + len(wanted)] == wanted for i in range(len(body))):
            problems.append(f"{where}: the line is no longer in {entry.function}")
    return problems


def pragma_lines(path: Path) -> list[int]:
    """The lines of ``path`` that mutmut leaves alone (``# pragma: no mutate``), from 1."""
    lines = path.read_text().splitlines()
    return [number for number, line in enumerate(lines, 1) if PRAGMA in line]


def unexplained_pragmas(paths: Iterable[Path]) -> list[str]:
    """``path:line`` of each pragma with no "Equivalent mutant" comment on its line or above
    it in its function (in its module, outside functions)."""
    found = []
    for path in paths:
        marked = pragma_lines(path)
        if not marked:
            continue
        lines = path.read_text().splitlines()
        spans = function_spans(ast.parse("\n".join(lines), str(path))).values()
        for number in marked:
            start = max((first for first, last in spans if first <= number <= last), default=1)
            comments = [line.partition("#")[2] for line in lines[start - 1 : number]]
            if not any(REASON in comment for comment in comments):
                found.append(f"{path}:{number}")
    return found
