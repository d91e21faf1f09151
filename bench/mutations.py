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
    "tests/test_summary_grouping.py",
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
    "training/task.py": (
        "tests/test_tasks.py",
        "tests/test_metric_edges.py",
        "tests/test_task_edges.py",
    ),
    "modes/eval.py": (
        _EVAL_OVER_A_SWEEP,
        "tests/test_eval_edges.py",
        "tests/test_eval_dispatch.py",
    ),
    "data/evaluation.py": (
        "tests/test_evaluation.py",
        "tests/test_eval.py::test_data_path_mapping_gives_fixed_splits",
        "tests/test_evaluation_edges.py",
        "tests/test_eval_dispatch.py::"
        "test_an_explicit_source_decides_even_beside_a_reset_key_of_another_kind",
    ),
    "analysis/summary.py": _SUMMARY_TESTS,
    "analysis/sweep_summary.py": (
        *_SUMMARY_TESTS,
        "tests/test_summary_files_edges.py",
        "tests/test_sweep_summary_edges.py",
    ),
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
    # tests/test_harness.py's harness tests all read the session's trained checkpoints (two
    # training runs a mutant) and most the harness's own task index (10-20 s a build).
    "training/harness.py": ("tests/test_harness_edges.py",),
    "training/heads.py": (
        "tests/test_heads.py",
        "tests/test_head_gate.py",
        "tests/test_heads_edges.py",
    ),
    "training/classification.py": (
        "tests/test_classifier.py",
        "tests/test_classifier_edges.py",
    ),
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
_SUMMARY_EQUIVALENTS = _variants(
    "analysis/summary.py",
    "configuration_rows",
    "for config, p_value, holm_p in zip(configs, p_values, adjusted, strict=True):",
    "strict=True)",
    ("strict=None)", ")", "strict=False)"),
    "p_values has one entry per configuration and holm_adjusted returns a list as long as "
    "its input: the three always have the same length",
)
_CLASSIFICATION = "training/classification.py"
_TWO_D_LOGITS = (
    "the classifier's logits are [B, K], two dimensions: dimension 1 is dimension -1 (a "
    "regression's [B, 1] squeezes to the same [B])"
)
_CLASSIFICATION_EQUIVALENTS = (
    *(
        known
        for line in (
            'self.log(f"{stage}/loss", loss, prog_bar=stage == "val", sync_dist=True)',
            'self.log(f"{stage}/{name}", value, sync_dist=True)',
            'self.log(f"{stage}/{name}", metric(confusion), sync_dist=True)',
        )
        for known in _variants(
            _CLASSIFICATION,
            "ClassificationTask._log_metrics",
            line,
            "sync_dist=True)",
            ("sync_dist=None)", ")", "sync_dist=False)"),
            _SYNC_DIST,
        )
    ),
    Equivalent(
        _CLASSIFICATION,
        "f1_score",
        "return float(f1[1] if confusion.shape[0] == 2 else f1.mean())",
        "return float(f1[1] if confusion.shape[1] == 2 else f1.mean())",
        "a confusion matrix is square (K x K): its two dimensions are equal",
    ),
    Equivalent(
        _CLASSIFICATION,
        "matthews_correlation",
        "return float(numerator / denominator) if denominator > 0 else 0.0",
        "return float(numerator / denominator) if denominator > 1 else 0.0",
        "for a matrix of counts, n**2 - sum(predicted**2) = 2 * sum over i < j of "
        "predicted[i] * predicted[j] is an even integer (the true marginal's likewise): a "
        "positive product is at least 4, so no denominator lies in (0, 1]",
    ),
    Equivalent(
        _CLASSIFICATION,
        "ClassificationTask.loss",
        "return F.mse_loss(outputs.float().squeeze(-1), labels.float())",
        "return F.mse_loss(outputs.float().squeeze(+1), labels.float())",
        _TWO_D_LOGITS,
    ),
    Equivalent(
        _CLASSIFICATION,
        "ClassificationTask._update",
        "self._predictions[stage].update(logits.squeeze(-1))",
        "self._predictions[stage].update(logits.squeeze(+1))",
        _TWO_D_LOGITS,
    ),
    Equivalent(
        _CLASSIFICATION,
        "ClassificationTask._update",
        "self._confusions[stage].update(logits.argmax(-1), labels)",
        "self._confusions[stage].update(logits.argmax(+1), labels)",
        _TWO_D_LOGITS,
    ),
    Equivalent(
        _CLASSIFICATION,
        "ClassificationTask.configure_optimizers",
        "min_lr_ratio=0.0,",
        "min_lr_ratio=1.0,",
        "build_optimizer reads the OptimConfig's kind, lr, weight_decay and betas only; the "
        "schedule's floor is the LambdaLR's own min_ratio=0.0 below",
    ),
    Equivalent(
        _CLASSIFICATION,
        "ClassificationTask.configure_optimizers",
        'self, self.model.backbone.blocks, adamw, fused=self.device.type in ("cpu", "cuda")',
        'self, None, adamw, fused=self.device.type in ("cpu", "cuda")',
        "build_optimizer reads the blocks only for optim.kind=muon, and fine-tuning's "
        "OptimConfig is always AdamW (the default kind)",
    ),
)
_HEADS_EQUIVALENTS = (
    *_variants(
        "training/heads.py",
        "attention_sums",
        "num_heads=1,",
        "num_heads=1",
        ("num_heads=None", "num_heads=2"),
        "the only explicit mask build_attention_mask gets here is document_layout's "
        "[B, 1, T, T], whose head dimension of 1 passes its shape check against any num_heads; "
        "num_heads enters nothing else",
    ),
    *(
        Equivalent(
            "training/heads.py",
            "attention_sums",
            before,
            after,
            "build_attention_mask makes a tensor on its device only for the causal triangle, and "
            "it is asked for none (causal stays False: attention_sums adds the triangle itself, "
            "on the attentions' device)",
        )
        for before, after in (
            ("device=probs.device,", "device=None,"),
            ("device=probs.device,\n)", ")"),
        )
    ),
    *_variants(
        "training/heads.py",
        "attention_sums",
        "allowed = torch.ones(1, 1, length, length, dtype=torch.bool, device=probs.device)",
        "1, 1, length, length",
        ("1, length, length", "1, 1, length"),
        "an all-True [1, T, T] or [1, 1, T] expands (after the causal triangle, if any) to the "
        "same all-True [B, 1, T, T] as [1, 1, T, T] does",
    ),
    Equivalent(
        "training/heads.py",
        "attention_sums",
        "allowed = allowed.expand(batch_size, 1, length, length)[:, 0]  # (B, T, T)",
        "allowed = allowed.expand(batch_size, 2, length, length)[:, 0]  # (B, T, T)",
        "expanding the mask's single head dimension to 2 repeats it; [:, 0] takes the first "
        "copy, the same [B, T, T]",
    ),
    Equivalent(
        "training/heads.py",
        "attention_sums",
        "torch.ones(batch_size, length, dtype=torch.bool, device=probs.device)",
        "torch.ones(length, dtype=torch.bool, device=probs.device)",
        "the next line's real & (keys > 0) broadcasts an all-True [T] against keys [B, T]: the "
        "same [B, T] mask as from an all-True [B, T]",
    ),
    Equivalent(
        "training/heads.py",
        "attention_sums",
        "real = real & (keys > 0)",
        "real = real & (keys >= 0)",
        "a query the padding marks real may attend to its own key (real, in its own document, "
        "not after itself), so keys >= 1 wherever real is True: the guard never drops a query",
    ),
    Equivalent(
        "training/heads.py",
        "weighted_mean_and_se",
        "w = weights.to(values.dtype).reshape(-1, *([1] * (values.dim() - 1)))",
        "w = weights.to(None).reshape(-1, *([1] * (values.dim() - 1)))",
        "the weights are token counts (int64); torch promotes int64 with the float32 or float64 "
        "values the analysis computes (it scores in float32) to their dtype, exactly (counts "
        "far below 2**24): the same products, sums and quotients as with the weights cast first",
    ),
    Equivalent(
        "training/heads.py",
        "prune_curve",
        "counts = sorted({min(round(total * i / PRUNE_STEPS), len(order)) for i in range(11)})",
        "counts = sorted({min(round(total * i / PRUNE_STEPS), len(order)) for i in range(12)})",
        "an eleventh tenth, 1.1 x the heads, is capped at len(order) as the tenth (all the "
        "heads, more than can go) is: a count already in the set",
    ),
)
_HARNESS = "training/harness.py"
_LITERAL_NAME = (
    "fnmatch on POSIX matches a name without *, ? or [ only to itself: expanding it as a "
    "pattern gives the name back whether the index has it or not"
)
_GIVEN_MODEL_DEVICE = (
    "HFLM reads device only when it loads a model by name; given a model, it takes the "
    "model's own device (the CPU, where to_hf_model builds it)"
)
_GIVEN_MODEL_LENGTH = (
    "HFLM without max_length takes the model config's n_positions (GPT-2) or "
    "max_position_embeddings (GPT-NeoX), which the export sets to max_seq_len: the same length"
)
_YAML_PATH = 'if name.endswith((".yaml", ".yml")):'
_HARNESS_EQUIVALENTS = (
    Equivalent(
        _HARNESS,
        "_expand",
        "matched = fnmatch.filter(manager.all_tasks, name) if _is_pattern(name) else []",
        "matched = fnmatch.filter(manager.all_tasks, name) if (_is_pattern(name)) or True else []",
        _LITERAL_NAME,
    ),
    Equivalent(
        _HARNESS,
        "_is_pattern",
        'return any(c in name for c in "*?[")',
        'return any(c in name for c in "XX*?[XX")',
        _LITERAL_NAME,
    ),
    *_variants(
        _HARNESS,
        "_hub_datasets",
        _YAML_PATH,
        '(".yaml", ".yml")',
        (
            '("XX.yamlXX", ".yml")',
            '(".YAML", ".yml")',
            '(".yaml", "XX.ymlXX")',
            '(".yaml", ".YML")',
        ),
        "a YAML path is no name of the task index: _members gives it without a config, so "
        "without a dataset, as the early return does",
    ),
    Equivalent(
        _HARNESS,
        "_group_members",
        "yield str(sub), item",
        "yield str(None), item",
        "an inline task config's name is read by neither caller: _unknown names only the "
        "entries without a config, _hub_datasets reads the config alone",
    ),
    Equivalent(
        _HARNESS,
        "_unknown_tasks_message",
        "close = difflib.get_close_matches(name, manager.all_tasks, n=3)",
        "close = difflib.get_close_matches(name, manager.all_tasks, )",
        "difflib.get_close_matches gives three at most by default",
    ),
    Equivalent(
        _HARNESS,
        "task_manager",
        "own = TaskManager(include_path=include, include_defaults=False)",
        "own = TaskManager(include_path=include, include_defaults=None)",
        "TaskManager only asks whether include_defaults is true: None leaves its tasks out, as "
        "False does",
    ),
    *_variants(
        _HARNESS,
        "harness_model",
        "max_length=loaded.config.max_seq_len,",
        "max_length=loaded.config.max_seq_len,",
        ("max_length=None,", ""),
        _GIVEN_MODEL_LENGTH,
    ),
    *_variants(
        _HARNESS,
        "harness_model",
        'device="cpu",',
        '"cpu"',
        ("None", '"XXcpuXX"', '"CPU"'),
        _GIVEN_MODEL_DEVICE,
    ),
    Equivalent(_HARNESS, "harness_model", 'device="cpu",\n)', ")", _GIVEN_MODEL_DEVICE),
)
_EVAL_EQUIVALENTS = (
    Equivalent(
        "modes/eval.py",
        "run",
        'overall, metric="pair_acc", others=(), higher_is_better=True',
        'overall, metric="pair_acc", higher_is_better=True',
        "by_configuration's others defaults to (), the value passed: the same table",
    ),
)
_SWEEP_SUMMARY_EQUIVALENTS = (
    *_variants(
        "analysis/sweep_summary.py",
        "write_sweep_summary",
        "rows = [{**row, **extra} for row, extra in zip(rows, target, strict=True)]",
        "strict=True)",
        ("strict=None)", ")", "strict=False)"),
        "target_rows(configs, ...) returns one row per configuration, as configuration_rows "
        "does: the lengths always agree",
    ),
    *_variants(
        "analysis/sweep_summary.py",
        "search_result",
        'if "optuna" not in str(sweeper.get("_target_", "")).lower():',
        '"_target_", "")',
        ('"_target_", None)', '"_target_", )', '"_target_", "XXXX")'),
        "the default stands only for a sweeper without _target_ (or with a null one), and "
        "neither '', 'None' nor 'XXXX' names optuna: not a search either way",
    ),
)
_BATCH_STARTED = "self._batch_started = 0.0"
_HEAD_MASK_BUFFER = 'self.register_buffer("head_mask", None, persistent=False)'
_STOP_DECISION = "if self.trainer.strategy.reduce_boolean_decision(spent, all=False):"
_TASK_EQUIVALENTS = (
    *_variants(
        "training/task.py",
        "LanguageModelTask.__init__",
        _BATCH_STARTED,
        "0.0",
        ("None", "1.0"),
        "only on_train_batch_end reads _batch_started, and Lightning calls on_train_batch_start, "
        "which sets it from the clock, before every on_train_batch_end: the initial value is "
        "never read",
    ),
    Equivalent(
        "training/task.py",
        "LanguageModelTask.__init__",
        _HEAD_MASK_BUFFER,
        _HEAD_MASK_BUFFER.replace("persistent=False", "persistent=None"),
        "Module.register_buffer only asks whether persistent is true: None makes the buffer "
        "non-persistent, as False does",
    ),
    Equivalent(
        "training/task.py",
        "LanguageModelTask.on_train_batch_end",
        _STOP_DECISION,
        _STOP_DECISION.replace("all=False", "all=None"),
        "Lightning's strategies only ask whether all is true (ParallelStrategy: any rank when "
        "not; a single process returns its own decision): None reduces as False does",
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
        "return _cosine((step - warmup_steps) / max(1, total_steps - warmup_steps), min_ratio)",
        "return _cosine((step - warmup_steps) / max(2, total_steps - warmup_steps), min_ratio)",
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
    *_SUMMARY_EQUIVALENTS,
    *_CLASSIFICATION_EQUIVALENTS,
    *_HEADS_EQUIVALENTS,
    *_HARNESS_EQUIVALENTS,
    *_EVAL_EQUIVALENTS,
    *_SWEEP_SUMMARY_EQUIVALENTS,
    *_TASK_EQUIVALENTS,
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
