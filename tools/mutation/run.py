"""Mutation testing of the modules that compute the numbers a user reads (mutmut).

Usage::

    python -m tools.mutation                                  # every module below
    python -m tools.mutation --module analysis/summary.py     # one (repeat --module for more)
    python -m tools.mutation --no-run                         # the last runs' tables again

For each module, mutmut (``pip install -e ".[mutation]"``) changes its code one small edit at
a time (a ``<`` for a ``<=``, a ``+ 1`` for a ``- 1``, a dropped argument, another string)
and runs the fast tests that cover it against every mutant; a mutant the tests pass with has
*survived*: the tests cannot tell that code from the real one. A survivor is either a gap in
the tests or *equivalent*, a change nobody can observe. An equivalent mutant is marked where it
stands, ``# pragma: no mutate`` on its line with the reason in a comment above (mutmut makes no
mutant of such a line); where that pragma would also silence mutants the tests kill, it is
listed instead, quoting its line (``tools/mutation/equivalents.py``), and this run stops before
it starts when an entry no longer quotes its code (``tools/mutation/marks.py``). The table
gives, per module, the lines marked ``no mutate``, the mutants, killed, survived (not
equivalent), timeout (the tests ran past mutmut's limit: counted as killed), no tests (code
the selection never runs), the listed equivalents, and the kill rate, (killed + timeout) /
(mutants - equivalent); then every real survivor with its diff, the work left, and every
listed equivalent that no survivor matched (the run then exits with 1).

Each module runs in a fresh copy of the checkout under ``.mutmut/MODULE/`` (mutmut works in
``mutants/`` beside the ``pyproject.toml`` it reads, with one test selection per config),
with one worker: minutes per module on a shared 2-core machine, so this is run by hand, not
in CI. ``cd .mutmut/MODULE && mutmut show NAME`` shows a mutant, ``mutmut browse`` all.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tools.mutation.equivalents import EQUIVALENT, Equivalent
from tools.mutation.marks import pragma_lines, stale_entries

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / ".mutmut"
# What a copy needs: every package the tests import (tests/ and pyproject.toml mutmut copies
# into mutants/ itself, from the copy).
PACKAGES = (
    *("analysis", "common", "conf", "data", "features", "hydra_plugins", "models", "modes"),
    "training",
)
FILES = ("train.py",)

_EVAL_OVER_A_SWEEP = "tests/test_sweeps.py::test_eval_over_a_sweep_groups_seeds_as_the_summary_does"
_SUMMARY_TESTS = (
    "tests/test_sweeps.py::test_seeds_are_replicates_of_one_configuration",
    "tests/test_sweeps.py::test_the_two_standard_error_rule_is_judged_near_its_threshold",
    "tests/test_sweeps.py::test_without_seeds_there_is_no_spread_and_no_verdict",
    "tests/test_sweeps.py::test_heatmap_cells_and_curves_come_from_the_configurations",
    "tests/test_sweeps.py::test_an_all_failed_cell_is_marked_failed",
    _EVAL_OVER_A_SWEEP,
    "tests/analysis/test_outputs.py",
    "tests/analysis/test_summary.py",
)
# train.py's message in a subprocess: it would run the mutated copy without mutmut's setup.
_PAIRS_TESTS = (
    "tests/features/pairs/test_pairs.py",
    "--deselect=tests/features/pairs/test_pairs.py::test_train_py_says_a_bad_pair_file_in_one_line",
    "--deselect=tests/features/pairs/test_pairs.py::test_the_old_command_names_the_new_one_in_one_line",
    "tests/features/pairs/test_pair_scoring.py",
)
# The fast tests that cover each module: in-process, no training beyond a few steps, so that
# a module takes minutes. Left out: the subprocess and sweep tests (seconds to a minute each,
# for every mutant of the functions they reach) and the tests whose fixtures train a model
# (tests/training/test_oracles.py, most of tests/modes/test_eval.py: 15-55 s of setup per
# mutant).
TESTS: dict[str, tuple[str, ...]] = {
    "training/task.py": (
        "tests/training/test_tasks.py",
        "tests/training/test_task_metrics.py",
        "tests/training/test_task_budgets.py",
    ),
    "modes/eval.py": (
        _EVAL_OVER_A_SWEEP,
        "tests/modes/test_eval_records.py",
        "tests/modes/test_eval_dispatch.py",
        # The features' hooks in eval (a checkpoint handed over, fields a scoring adds) are
        # checked by the features that plug into them.
        "tests/features/finetune/test_eval_of_classifiers.py",
        "tests/features/heads/test_pruning_in_eval.py",
    ),
    "data/evaluation.py": (
        "tests/data/test_evaluation.py",
        "tests/modes/test_eval.py::test_data_path_mapping_gives_fixed_splits",
        "tests/modes/test_eval_dispatch.py::"
        "test_an_explicit_source_decides_even_beside_a_reset_key_of_another_kind",
    ),
    "analysis/summary.py": _SUMMARY_TESTS,
    "analysis/sweep_summary.py": (
        *_SUMMARY_TESTS,
        "tests/analysis/test_summary_files.py",
        "tests/analysis/test_summary_sections.py",
        # a feature's sentences in the summary (the search's "sampled" and its notes)
        "tests/features/optuna/test_search_summary.py",
    ),
    "data/examples.py": (
        "tests/data/test_datamodule.py",
        "tests/data/test_evaluation.py",
        "tests/data/test_windows.py",
    ),
    "data/collate.py": (
        "tests/data/test_datamodule.py",
        "tests/data/test_document_mask.py",
        "tests/data/test_windows.py",
    ),
    "features/pairs/command.py": _PAIRS_TESTS,
    "features/pairs/sentence_scores.py": _PAIRS_TESTS,
    "analysis/significance.py": ("tests/analysis/test_significance.py",),
    "analysis/time_to_target.py": (
        "tests/training/test_budget.py",
        "tests/analysis/test_summary.py",
    ),
    "training/budget.py": ("tests/training/test_budget.py",),
    # tests/features/harness/test_harness.py's harness tests all read the session's trained
    # checkpoints (two training runs a mutant) and most the harness's own task index (10-20 s
    # a build).
    "features/harness/runner.py": ("tests/features/harness/test_tasks_and_requests.py",),
    "features/heads/statistics.py": (
        "tests/features/heads/test_heads.py",
        "tests/models/test_head_gate.py",
        "tests/features/heads/test_head_statistics.py",
    ),
    "features/finetune/task.py": (
        "tests/features/finetune/test_classifier.py",
        "tests/features/finetune/test_classification_task.py",
    ),
}
# Every test run: no slow or GPU test even where a whole file is selected, in one process
# (mutmut's trampolines are set up in the process that runs the tests: no xdist workers).
PYTEST_ARGS = ("-p", "no:cacheprovider", "-m", "not slow and not gpu", "-n", "0")


@dataclass(frozen=True)
class Mutant:
    name: str  # mutmut's, e.g. analysis.summary.x_mean_pm_std__mutmut_3
    status: str  # killed | survived | timeout | no tests | ...

    @property
    def function(self) -> str:
        """The mutated function as code names it: ``Configuration.mean_of``, ``_display``."""
        mangled = self.name.rsplit("__mutmut_", 1)[0].rsplit(".", 1)[1]
        if mangled.startswith("xǁ"):  # a method: xǁClassǁmethod
            return ".".join(mangled[2:].split("ǁ"))
        return mangled.removeprefix("x_")


def copy_checkout(module: str) -> Path:
    """A fresh copy of the checkout for ``module``'s run, its pyproject.toml configured."""
    work = work_dir(module)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in (*PACKAGES, "tests"):
        shutil.copytree(ROOT / name, work / name, ignore=ignore)
    for name in FILES:
        shutil.copy2(ROOT / name, work / name)
    config = {
        "source_paths": [*PACKAGES, *FILES],
        "only_mutate": [module],
        "pytest_add_cli_args": list(PYTEST_ARGS),
        "pytest_add_cli_args_test_selection": list(TESTS[module]),
    }
    table = "\n".join(f"{key} = {json.dumps(value)}" for key, value in config.items())
    pyproject = (ROOT / "pyproject.toml").read_text()
    (work / "pyproject.toml").write_text(f"{pyproject}\n[tool.mutmut]\n{table}\n")
    return work


def mutmut(work: Path, *args: str, log: Path | None = None) -> str:
    """``mutmut ARGS`` in ``work``; its output (to ``log`` instead when given: the run's
    progress spinner is long)."""
    command = [sys.executable, "-m", "mutmut", *args]
    # One thread per test run: mutmut forks every run from a process that has used torch's
    # OpenMP threads, and a forked child that starts them again can hang (mutmut then waits
    # out a timeout per mutant); the tiny tensors gain nothing from more threads anyway.
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if log is None:
        done = subprocess.run(
            command, cwd=work, env=env, capture_output=True, text=True, check=True
        )
        return done.stdout
    with open(log, "w") as out:
        subprocess.run(command, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT, check=True)
    return ""


def results(work: Path) -> list[Mutant]:
    """Every mutant of the run in ``work`` with its status (``mutmut results --all true``)."""
    found = re.findall(r"^\s*(\S+): (.+)$", mutmut(work, "results", "--all", "true"), re.M)
    return [Mutant(name, status.strip()) for name, status in found]


def changed_lines(work: Path, mutant: Mutant) -> tuple[str, str]:
    """(the lines the mutant removes, the lines it adds), each stripped and joined by newlines."""
    diff = mutmut(work, "show", mutant.name).splitlines()
    removed = [line[1:].strip() for line in diff if line.startswith("-") and line[:3] != "---"]
    added = [line[1:].strip() for line in diff if line.startswith("+") and line[:3] != "+++"]
    return "\n".join(removed), "\n".join(added)


def known_equivalent(module: str, mutant: Mutant, change: tuple[str, str]) -> Equivalent | None:
    """The entry of ``EQUIVALENT`` that names this mutant, if any."""
    for known in EQUIVALENT:
        if (known.module, known.function, (known.before, known.after)) == (
            module,
            mutant.function,
            change,
        ):
            return known
    return None


@dataclass
class ModuleResult:
    module: str
    mutants: list[Mutant]
    equivalent: list[Equivalent]  # the listed ones that a survivor matched
    survivors: list[tuple[Mutant, tuple[str, str]]]  # not equivalent, with their change
    seconds: float

    @property
    def marked(self) -> int:
        """The module's lines marked ``# pragma: no mutate`` (mutmut made no mutant of them)."""
        return len(pragma_lines(ROOT / self.module))

    @property
    def unmatched(self) -> list[Equivalent]:
        """The module's listed equivalents that no survivor matched: killed now, or the entry
        is wrong."""
        return [e for e in EQUIVALENT if e.module == self.module and e not in self.equivalent]

    def count(self, status: str) -> int:
        return sum(m.status == status for m in self.mutants)

    def row(self) -> list[str]:
        total, killed, timeout = len(self.mutants), self.count("killed"), self.count("timeout")
        judged = total - len(self.equivalent)
        rate = f"{100 * (killed + timeout) / judged:.1f}%" if judged else "-"
        counts = (total, killed, len(self.survivors), timeout, self.count("no tests"))
        other = total - killed - timeout - self.count("survived") - self.count("no tests")
        return [
            f"`{self.module}`",
            str(self.marked),
            *(str(n) for n in counts),
            str(len(self.equivalent)),
            str(other),
            rate,
            f"{self.seconds / 60:.1f} min",
        ]


def work_dir(module: str) -> Path:
    return WORK / module.replace("/", ".").removesuffix(".py")


def run_module(module: str, again: bool = True) -> ModuleResult:
    """Mutate ``module`` in a fresh copy; ``again=False``: report the last run's results
    (after a change to ``EQUIVALENT``, say) without running anything."""
    work = work_dir(module)
    wall = work / "wall-seconds"
    if again:
        start = time.perf_counter()
        copy_checkout(module)
        mutmut(work, "run", "--max-children", "1", log=work / "mutmut-run.log")
        wall.write_text(f"{time.perf_counter() - start:.1f}\n")
    elif not wall.is_file():
        raise SystemExit(f"{module} has no finished run in {work}: run it without --no-run")
    mutants = results(work)
    seconds = float(wall.read_text())
    equivalent, survivors = [], []
    for mutant in (m for m in mutants if m.status == "survived"):
        change = changed_lines(work, mutant)
        known = known_equivalent(module, mutant, change)
        if known:
            equivalent.append(known)
        else:
            survivors.append((mutant, change))
    return ModuleResult(module, mutants, equivalent, survivors, seconds)


HEADER = [
    "module",
    "no mutate",
    "mutants",
    "killed",
    "survived",
    "timeout",
    "no tests",
    "equivalent",
    "other",
    "kill rate",
    "wall",
]


def report(results: list[ModuleResult]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r.row()) + " |" for r in results]
    for result in results:
        for mutant, (before, after) in result.survivors:
            lines.append(f"\nsurvived: {mutant.name} ({result.module}, {mutant.function})")
            lines += [f"  - {line}" for line in before.splitlines()]
            lines += [f"  + {line}" for line in after.splitlines()]
        for known in result.unmatched:
            lines.append(
                f"\nlisted as equivalent but no survivor ({result.module}, {known.function}): "
                f"{known.before!r} -> {known.after!r}: killed now, or the entry is wrong; "
                "fix or delete it in tools/mutation/equivalents.py"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--module",
        action="append",
        choices=list(TESTS),
        help="a module to mutate (repeatable); default: all of them",
    )
    parser.add_argument(
        "--no-run",
        action="store_true",
        help="report the last run of each module again (after editing EQUIVALENT)",
    )
    args = parser.parse_args()
    modules = args.module or list(TESTS)
    stale = stale_entries(ROOT, [e for e in EQUIVALENT if e.module in modules])
    if stale:
        print("tools/mutation/equivalents.py quotes code that is gone:", file=sys.stderr)
        print("\n".join(f"  {problem}" for problem in stale), file=sys.stderr)
        raise SystemExit(2)
    results = []
    for module in modules:
        if not args.no_run:
            print(f"mutating {module} with {len(TESTS[module])} test selections ...", flush=True)
        results.append(run_module(module, again=not args.no_run))
    print(report(results))
    if any(result.unmatched for result in results):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
