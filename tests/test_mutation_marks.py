"""The marks of equivalent mutants stay true (tools/mutation, docs/benchmarks.md): every
``# pragma: no mutate`` in the code says why, and every listed equivalent still quotes lines of
its function, so that an edit of the code it names fails here, not silently in the next
mutation run. Plain text and ``ast``: mutmut is not needed."""

from __future__ import annotations

from pathlib import Path

from tools.mutation.equivalents import EQUIVALENT, Equivalent
from tools.mutation.marks import pragma_lines, stale_entries, unexplained_pragmas

ROOT = Path(__file__).resolve().parent.parent
NOT_CODE = {"tests", "tools", "mutants"}  # tests, the tooling itself, mutmut's copies


def code_files() -> list[Path]:
    """Every module of the application and its benchmarks (the checkout's, not a venv's)."""
    return sorted(
        path
        for path in ROOT.rglob("*.py")
        if not any(
            part.startswith(".") or part in NOT_CODE for part in path.relative_to(ROOT).parts
        )
    )


def test_every_listed_equivalent_quotes_lines_of_its_function() -> None:
    assert stale_entries(ROOT) == []


def test_every_pragma_in_the_code_gives_its_reason() -> None:
    files = code_files()
    assert sum(len(pragma_lines(path)) for path in files) > 0
    assert unexplained_pragmas(files) == []


def test_a_listed_equivalent_whose_code_changed_is_reported(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("class C:\n    def f(self, x):\n        return x < 1\n")
    entries = [
        Equivalent("m.py", "C.f", "return x < 1", "return x <= 1", "kept"),
        Equivalent("m.py", "C.f", "return x < 2", "return x <= 2", "the line changed"),
        Equivalent("m.py", "g", "return x < 1", "return x <= 1", "no such function"),
        Equivalent("gone.py", "f", "return x < 1", "return x <= 1", "no such module"),
    ]
    problems = stale_entries(tmp_path, entries)
    assert len(problems) == 3
    assert "no longer in C.f" in problems[0]
    assert "no function g" in problems[1]
    assert "no module gone.py" in problems[2]


def test_a_pragma_without_a_reason_in_its_function_is_reported(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "def f(x):\n"
        "    # Equivalent mutants: 2 or 3 alike.\n"
        "    y = x + 1  # pragma: no mutate\n"
        "    return y\n"
        "\n"
        "\n"
        "def g(x):\n"
        "    return x - 1  # pragma: no mutate\n"
    )
    assert pragma_lines(module) == [3, 8]
    assert unexplained_pragmas([module]) == [f"{module}:8"]


def test_the_list_holds_no_entry_twice() -> None:
    assert len(set(EQUIVALENT)) == len(EQUIVALENT)
