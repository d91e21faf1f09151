"""Mutation testing of the modules that compute the numbers a user reads (mutmut).

Usage::

    python -m bench.mutations                              # every module below
    python -m bench.mutations --module analysis/summary.py    # one (repeat --module for more)
    python -m bench.mutations --no-run                     # the last runs' tables again

For each module, mutmut (``pip install -e ".[mutation]"``) changes its code one small edit at
a time (a ``<`` for a ``<=``, a ``+ 1`` for a ``- 1``, a dropped argument, another string)
and runs the fast tests that cover it against every mutant; a mutant the tests pass with has
*survived*: the tests cannot tell that code from the real one. A survivor is either a gap in
the tests or *equivalent*, a change nobody can observe (``EQUIVALENT`` below lists those,
each with its reason). The table gives, per module, the mutants, killed, survived (not
equivalent), timeout (the tests ran past mutmut's limit: counted as killed), no tests (code
the selection never runs), equivalent, and the kill rate, (killed + timeout) / (mutants -
equivalent); then every real survivor with its diff, the work left.

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

from bench.launch import ROOT

WORK = ROOT / ".mutmut"
# What a copy needs: every package the tests import (tests/ and pyproject.toml mutmut copies
# into mutants/ itself, from the copy).
PACKAGES = ("analysis", "bench", "common", "conf", "data", "models", "modes", "training")
FILES = ("train.py",)

_EVAL_OVER_A_SWEEP = "tests/test_sweeps.py::test_eval_over_a_sweep_groups_seeds_as_the_summary_does"
_SUMMARY_TESTS = (
    "tests/test_sweeps.py::test_seeds_are_replicates_of_one_configuration",
    "tests/test_sweeps.py::test_the_two_standard_error_rule_is_judged_near_its_threshold",
    "tests/test_sweeps.py::test_without_seeds_there_is_no_spread_and_no_verdict",
    "tests/test_sweeps.py::test_heatmap_cells_and_curves_come_from_the_configurations",
    "tests/test_sweeps.py::test_an_all_failed_cell_is_marked_failed",
    _EVAL_OVER_A_SWEEP,
    "tests/test_outputs.py",
    "tests/test_summary_edges.py",
)
# train.py's message in a subprocess: it would run the mutated copy without mutmut's setup.
_PAIRS_TESTS = (
    "tests/test_pairs.py",
    "--deselect=tests/test_pairs.py::test_train_py_says_a_bad_pair_file_in_one_line",
    "tests/test_pairs_edges.py",
)
# The fast tests that cover each module: in-process, no training beyond a few steps, so that
# a module takes minutes. Left out: the subprocess and sweep tests (seconds to a minute each,
# for every mutant of the functions they reach) and the tests whose fixtures train a model
# (tests/test_oracles.py, most of tests/test_eval.py: 15-55 s of setup per mutant).
TESTS: dict[str, tuple[str, ...]] = {
    "training/task.py": ("tests/test_tasks.py", "tests/test_metric_edges.py"),
    "modes/eval.py": (_EVAL_OVER_A_SWEEP, "tests/test_eval_edges.py"),
    "data/evaluation.py": (
        "tests/test_evaluation.py",
        "tests/test_eval.py::test_data_path_mapping_gives_fixed_splits",
        "tests/test_evaluation_edges.py",
    ),
    "analysis/summary.py": _SUMMARY_TESTS,
    "analysis/sweep_summary.py": (*_SUMMARY_TESTS, "tests/test_summary_files_edges.py"),
    "data/examples.py": (
        "tests/test_data.py",
        "tests/test_evaluation.py",
        "tests/test_window_edges.py",
    ),
    "data/collate.py": (
        "tests/test_data.py",
        "tests/test_document_mask.py",
        "tests/test_window_edges.py",
    ),
    "modes/eval_pairs.py": _PAIRS_TESTS,
    "models/sentence_scores.py": _PAIRS_TESTS,
    "analysis/significance.py": ("tests/test_significance.py",),
    "analysis/time_to_target.py": ("tests/test_budget.py", "tests/test_summary_edges.py"),
    "training/budget.py": ("tests/test_budget.py",),
    "training/harness.py": ("tests/test_harness.py",),
    "training/heads.py": ("tests/test_heads.py", "tests/test_head_gate.py"),
    "training/classification.py": ("tests/test_classifier.py",),
}
# Every test run: no slow or GPU test even where a whole file is selected, in one process
# (mutmut's trampolines are set up in the process that runs the tests: no xdist workers).
PYTEST_ARGS = ("-p", "no:cacheprovider", "-m", "not slow and not gpu", "-n", "0")


@dataclass(frozen=True)
class Equivalent:
    """A mutant no test can tell from the code: its function ("Class.method" or "function")
    and the lines it changes (as ``mutmut show`` prints them, stripped), with the reason."""

    module: str
    function: str
    before: str
    after: str
    reason: str


def _variants(
    module: str, function: str, line: str, part: str, replacements: tuple[str, ...], reason: str
) -> list[Equivalent]:
    """The equivalent mutants of ``line`` that put each of ``replacements`` for ``part``
    (mutmut writes a dropped last argument as ``, )``)."""
    return [
        Equivalent(module, function, line, line.replace(part, new), reason) for new in replacements
    ]


_SYNC_DIST = (
    "torchmetrics has already reduced the value over the DDP ranks, so sync_dist only "
    "averages equal values (and silences Lightning's epoch-level warning); one process "
    "logs the same value either way"
)
_LOGGED = (
    'self.log(f"{stage}/loss", loss, prog_bar=stage == "val", sync_dist=True)',
    'self.log(f"{stage}/ppl", torch.exp(loss.clamp(max=50)), sync_dist=True)',
    'self.log(f"{stage}/acc", accuracy, sync_dist=True)',
    'self.log(f"{stage}/{name}", value, sync_dist=True)',
)
_STAGE = 'stage="validate" if self.cfg.split == "validation" else "test",'
_STAGES = (
    "stage=None,",
    'stage="validate" if (self.cfg.split == "validation") and False else "test",',
    'stage="validate" if (self.cfg.split == "validation") or True else "test",',
    'stage="XXvalidateXX" if self.cfg.split == "validation" else "test",',
    'stage="VALIDATE" if self.cfg.split == "validation" else "test",',
    'stage="validate" if self.cfg.split != "validation" else "test",',
    'stage="validate" if self.cfg.split == "XXvalidationXX" else "test",',
    'stage="validate" if self.cfg.split == "VALIDATION" else "test",',
    'stage="validate" if self.cfg.split == "validation" else "XXtestXX",',
    'stage="validate" if self.cfg.split == "validation" else "TEST",',
)
_ZIP = 'beyond = [c.label() for c, row in zip(configs, rows, strict=True) if row["exceeds_2se"]]'
_SWEEP_SUMMARY = (
    *_variants(
        "analysis/sweep_summary.py",
        "_explanation",
        _ZIP,
        "strict=True)",
        ("strict=None)", ")", "strict=False)"),
        "the rows are configuration_rows(configs), one per configuration: the lengths always agree",
    ),
    *_variants(
        "analysis/sweep_summary.py",
        "_write_csv",
        'with open(path, "w", newline="") as f:',
        'newline=""',
        ("newline=None", ""),
        "on POSIX a text file writes the csv module's \\r\\n line ends unchanged either way "
        "(newline='' matters on Windows, where \\n would become \\r\\n)",
    ),
    *_variants(
        "analysis/sweep_summary.py",
        "_write_csv",
        'writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")',
        'extrasaction="ignore"',
        ("", 'extrasaction="IGNORE"'),
        "every row written is built from the columns, so it holds no extra key to ignore or "
        "raise on (and DictWriter lower-cases the option)",
    ),
    Equivalent(
        "analysis/sweep_summary.py",
        "_write_csv",
        '{c: "" if row.get(c) is None else row.get(c) for c in columns} for row in rows',
        '{c: "" if (row.get(c) is None) and False else row.get(c) for c in columns} for row '
        "in rows",
        "the csv module writes None as an empty field, as the mapping does",
    ),
)
_DRAW = (
    "rng.random draws from [0, 1) in steps of 2**-53: a draw equal to the threshold has a "
    "chance of about 1e-16 per token"
)
_SIGNIFICANCE = "analysis/significance.py"
_LENTZ_GUARD = (
    "Lentz's guard puts _TINY (1e-30) for a term within _TINY of zero; no x in (0, 1) with "
    "a, b > 0 makes one, and at exactly _TINY both branches give the same value"
)
_TERMS = (
    "the fraction converges in tens of terms for every x, a, b a t-test produces; the cap on "
    "terms only bounds a divergence"
)
_SIGNIFICANCE_EQUIVALENTS = (
    *_variants(
        _SIGNIFICANCE,
        "regularized_beta",
        "if x < (a + 1) / (a + b + 2):  # the continued fraction converges fast on this side",
        "x < (a + 1) / (a + b + 2)",
        ("x <= (a + 1) / (a + b + 2)", "x < (a + 2) / (a + b + 2)", "x < (a + 1) / (a + b + 3)"),
        "the switch only picks the side where the fraction converges faster: both sides give "
        "I_x(a, b) (tests/test_significance.py checks it against scipy on both)",
    ),
    *_variants(
        _SIGNIFICANCE,
        "_beta_fraction",
        "def _beta_fraction(x: float, a: float, b: float, max_terms: int = 500) -> float:",
        "500",
        ("501",),
        _TERMS,
    ),
    *_variants(
        _SIGNIFICANCE,
        "_beta_fraction",
        "for m in range(1, max_terms + 1):",
        "max_terms + 1",
        ("max_terms - 1", "max_terms + 2"),
        _TERMS,
    ),
    *_variants(
        _SIGNIFICANCE,
        "_beta_fraction",
        "d = 1.0 / (d if abs(d) > _TINY else _TINY)",
        "abs(d) > _TINY",
        ("(abs(d) > _TINY) or True", "abs(d) >= _TINY"),
        _LENTZ_GUARD,
    ),
    *_variants(
        _SIGNIFICANCE,
        "_beta_fraction",
        "c = c if abs(c) > _TINY else _TINY",
        "abs(c) > _TINY",
        ("(abs(c) > _TINY) or True", "abs(c) >= _TINY"),
        _LENTZ_GUARD,
    ),
    Equivalent(
        _SIGNIFICANCE,
        "_beta_fraction",
        "if abs(c * d - 1.0) < _EPSILON:",
        "if abs(c * d - 1.0) <= _EPSILON:",
        "the stop at exactly _EPSILON: one more term changes the value by less than that",
    ),
)
_COLLATE = (
    *(
        known
        for line in (
            '"input_ids": batch[:, :-1].clone(memory_format=torch.contiguous_format),',
            '"labels": batch[:, 1:].clone(memory_format=torch.contiguous_format),',
        )
        for known in _variants(
            "data/collate.py",
            "collate_blocks",
            line,
            "torch.contiguous_format",
            ("None",),
            "clone copies either way, so the labels never share the inputs' storage; the "
            "default (preserve) format gives these slices contiguous copies too",
        )
    ),
    Equivalent(
        "data/collate.py",
        "MLMCollator.__init__",
        "seed: int = 0,",
        "seed: int = 1,",
        "the data module always passes the run's seed; no number depends on the default",
    ),
    *_variants(
        "data/collate.py",
        "MLMCollator.__init__",
        "is_regular = torch.ones(vocab_size, dtype=torch.bool)",
        "dtype=torch.bool)",
        ("dtype=None)", ")"),
        "a float mask of ones with the specials set to 0 has the same nonzero() indices",
    ),
    *_variants(
        "data/collate.py",
        "MLMCollator.__call__",
        "input_ids = torch.full((len(examples), length), self.pad_id, dtype=torch.long)",
        "dtype=torch.long)",
        ("dtype=None)", ")"),
        "torch.full infers int64 (torch.long) from the integer pad id",
    ),
    *_variants(
        "data/collate.py",
        "MLMCollator.__call__",
        "input_ids[row, : len(example)] = torch.from_numpy(np.asarray(example, dtype=np.int64))",
        "dtype=np.int64)",
        ("dtype=None)", ")"),
        "the examples are integer arrays (EncoderExamples concatenates to int64) and the "
        "assignment casts into the int64 batch: the same ids",
    ),
    Equivalent(
        "data/collate.py",
        "MLMCollator.mask",
        "selected = maskable & torch.from_numpy(rng.random(shape) < self.mlm_probability)",
        "selected = maskable & torch.from_numpy(rng.random(shape) <= self.mlm_probability)",
        _DRAW,
    ),
    Equivalent(
        "data/collate.py",
        "MLMCollator.mask",
        "masked = torch.where(selected & (action < 0.8), self.mask_id, input_ids)",
        "masked = torch.where(selected & (action <= 0.8), self.mask_id, input_ids)",
        _DRAW,
    ),
    *_variants(
        "data/collate.py",
        "MLMCollator.mask",
        "masked = torch.where(selected & (action >= 0.8) & (action < 0.9), random_ids, masked)",
        "(action >= 0.8) & (action < 0.9)",
        ("(action > 0.8) & (action < 0.9)", "(action >= 0.8) & (action <= 0.9)"),
        _DRAW,
    ),
)
_SCORES = "models/sentence_scores.py"
_SAME_ON_A_CPU = (
    "the tensors go to the network's device: on a CPU, where these tests run, .to(None) and "
    "device=None leave them where .to(device) puts them; only a network on a GPU would see "
    "inputs on another device"
)
# (function, line, mutated line) of the mutants that only move tensors to another device
_DEVICE_MOVES = (
    (
        "decoder_log_likelihoods",
        "device = next(model.parameters()).device",
        "device = None",
    ),
    ("decoder_log_likelihoods", "ids = ids.to(device)", "ids = ids.to(None)"),
    (
        "decoder_log_likelihoods",
        "scored = (lengths - 1).to(device)  # targets per row",
        "scored = (lengths - 1).to(None)  # targets per row",
    ),
    *(
        (
            "decoder_log_likelihoods",
            "real = torch.arange(ids.shape[1] - 1, device=device) < scored[:, None]  # (B, T - 1)",
            f"real = torch.arange(ids.shape[1] - 1, {device}) < scored[:, None]  # (B, T - 1)",
        )
        for device in ("device=None", "")
    ),
    (
        "pseudo_log_likelihoods",
        "device = next(model.parameters()).device",
        "device = None",
    ),
    *(
        (
            "pseudo_log_likelihoods",
            "logits = model(ids.to(device), attention_mask=attention_mask.to(device))",
            after,
        )
        for after in (
            "logits = model(ids.to(None), attention_mask=attention_mask.to(device))",
            "logits = model(ids.to(device), attention_mask=attention_mask.to(None))",
        )
    ),
    *(
        (
            "pseudo_log_likelihoods",
            "logits = logits[rows.to(device), position.to(device)].float()  # (R, V)",
            after,
        )
        for after in (
            "logits = logits[rows.to(None), position.to(device)].float()  # (R, V)",
            "logits = logits[rows.to(device), position.to(None)].float()  # (R, V)",
        )
    ),
    (
        "pseudo_log_likelihoods",
        "picked = logits.log_softmax(-1).gather(-1, targets.to(device)[:, None])[:, 0]  # (R,)",
        "picked = logits.log_softmax(-1).gather(-1, targets.to(None)[:, None])[:, 0]  # (R,)",
    ),
)
_PAIRS_EQUIVALENTS = (
    *(
        Equivalent(_SCORES, function, before, after, _SAME_ON_A_CPU)
        for function, before, after in _DEVICE_MOVES
    ),
    *(
        known
        for part, mutated in (("log_softmax(-1)", "log_softmax(+1)"), ("gather(-1,", "gather(+1,"))
        for known in _variants(
            _SCORES,
            "pseudo_log_likelihoods",
            "picked = logits.log_softmax(-1).gather(-1, targets.to(device)[:, None])[:, 0]  # (R,)",
            part,
            (mutated,),
            "the logits here are (R, V), one row per masked token: dimension +1 is dimension -1",
        )
    ),
)
EQUIVALENT: tuple[Equivalent, ...] = (
    *_COLLATE,
    *_SIGNIFICANCE_EQUIVALENTS,
    *(
        known
        for call in ("validate", "test")
        for known in _variants(
            "modes/eval.py",
            "evaluate_checkpoint",
            f"results = trainer.{call}(task, datamodule=datamodule, verbose=False)[0]",
            "verbose=False",
            ("verbose=None",),
            "Lightning only asks whether verbose is true: None prints nothing, as False does",
        )
    ),
    *_SWEEP_SUMMARY,
    *(
        Equivalent(
            "data/evaluation.py",
            "EvaluationData.prepare",
            _STAGE,
            after,
            "LMDataModule.setup(stage) reads no stage: it sets up every split the store has, "
            "and the split scored is cfg.split whatever the stage",
        )
        for after in _STAGES
    ),
    *(
        known
        for line in _LOGGED
        for known in _variants(
            "training/task.py",
            "LanguageModelTask._log_eval_metrics",
            line,
            "sync_dist=True)",
            ("sync_dist=None)", ")", "sync_dist=False)"),
            _SYNC_DIST,
        )
    ),
    Equivalent(
        "training/task.py",
        "warmup_cosine",
        "if step < warmup_steps:",
        "if step <= warmup_steps:",
        "at step == warmup_steps the warmup gives (w + 1) / (w + 1) = 1 and the cosine "
        "cos(0) = 1: the same multiplier",
    ),
    Equivalent(
        "training/task.py",
        "warmup_cosine",
        "if step >= total_steps:",
        "if step > total_steps:",
        "at step == total_steps the cosine gives min_ratio + (1 - min_ratio) * 0.5 * (1 + "
        "cos(pi)) = min_ratio exactly (cos(pi) is -1.0 in floats), the floor the branch returns",
    ),
    Equivalent(
        "training/task.py",
        "warmup_cosine",
        "progress = (step - warmup_steps) / max(1, total_steps - warmup_steps)",
        "progress = (step - warmup_steps) / max(2, total_steps - warmup_steps)",
        "the floor of the divisor matters only when total_steps - warmup_steps <= 1, where the "
        "cosine branch runs at step == warmup_steps alone, with progress 0 either way",
    ),
    Equivalent(
        "training/task.py",
        "mean_token_loss",
        "ignore_index=IGNORE_INDEX,",
        "",
        "cross_entropy's default ignore_index is -100, IGNORE_INDEX's value",
    ),
    Equivalent(
        "analysis/summary.py",
        "configuration_rows",
        "diff, exceeds = difference_from_best(config, best) if best else (None, None)",
        "diff, exceeds = difference_from_best(config, best) if (best) or True else (None, None)",
        "best is None only when no configuration has a mean, and difference_from_best returns "
        "(None, None) for a configuration without one before it reads best",
    ),
    *_PAIRS_EQUIVALENTS,
)


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
    equivalent: list[Equivalent]
    survivors: list[tuple[Mutant, tuple[str, str]]]  # not equivalent, with their change
    seconds: float

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
        for known in EQUIVALENT:
            if known.module == result.module and known not in result.equivalent:
                lines.append(
                    f"\nlisted as equivalent but no survivor: {known.function}: {known.before!r}"
                    f" -> {known.after!r}"
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
    results = []
    for module in modules:
        if not args.no_run:
            print(f"mutating {module} with {len(TESTS[module])} test selections ...", flush=True)
        results.append(run_module(module, again=not args.no_run))
    print(report(results))


if __name__ == "__main__":
    main()
