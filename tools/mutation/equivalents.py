"""The equivalent mutants that a ``# pragma: no mutate`` cannot single out, each quoting its
line, with the reason no test can tell it from the code.

An equivalent mutant is marked where it stands when it can be: ``# pragma: no mutate`` on its
line (mutmut then makes no mutant of that line), with the reason in a comment above. mutmut's
pragma silences every mutant of the line, though, and any mutant that removes it (the
statement's ``x = None``, a dropped argument before it); on the lines below it would also
silence mutants the tests kill today, so these stay listed: a survivor that changes ``before``
into ``after`` in ``function`` counts as equivalent. An entry whose lines are no longer in its
function fails ``python -m tools.mutation`` before it runs anything, and
tests/test_mutation_marks.py in the suite (``tools.mutation.marks``); an entry that matched no
survivor fails the run.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Equivalent:
    """A mutant no test can tell from the code: its function ("Class.method" or "function")
    and the lines it changes (as ``mutmut show`` prints them, stripped), with the reason."""

    module: str
    function: str
    before: str
    after: str
    reason: str


def variants(
    module: str, function: str, line: str, part: str, replacements: tuple[str, ...], reason: str
) -> list[Equivalent]:
    """The equivalent mutants of ``line`` that put each of ``replacements`` for ``part``
    (mutmut writes a dropped last argument as ``, )``)."""
    return [
        Equivalent(module, function, line, line.replace(part, new), reason) for new in replacements
    ]


def true_flag_variants(
    module: str, function: str, line: str, flag: str, reason: str
) -> list[Equivalent]:
    """The equivalent mutants of ``line``'s last keyword argument ``flag=True``: ``None``,
    dropped and ``False``."""
    replacements = (f"{flag}=None)", ")", f"{flag}=False)")
    return variants(module, function, line, f"{flag}=True)", replacements, reason)


# data/ ---------------------------------------------------------------------------------------

_COLLATE = "data/collate.py"
_DRAW = (
    "rng.random draws from [0, 1) in steps of 2**-53: a draw equal to the threshold has a "
    "chance of about 1e-16 per token"
)
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
DATA = (
    *variants(
        _COLLATE,
        "MLMCollator.__init__",
        "is_regular = torch.ones(vocab_size, dtype=torch.bool)",
        "dtype=torch.bool)",
        ("dtype=None)", ")"),
        "a float mask of ones with the specials set to 0 has the same nonzero() indices",
    ),
    *variants(
        _COLLATE,
        "MLMCollator.__call__",
        "input_ids = torch.full((len(examples), length), self.pad_id, dtype=torch.long)",
        "dtype=torch.long)",
        ("dtype=None)", ")"),
        "torch.full infers int64 (torch.long) from the integer pad id",
    ),
    *variants(
        _COLLATE,
        "MLMCollator.__call__",
        "input_ids[row, : len(example)] = torch.from_numpy(np.asarray(example, dtype=np.int64))",
        "dtype=np.int64)",
        ("dtype=None)", ")"),
        "the examples are integer arrays (EncoderExamples concatenates to int64) and the "
        "assignment casts into the int64 batch: the same ids",
    ),
    *variants(
        _COLLATE,
        "MLMCollator.mask",
        "selected = maskable & torch.from_numpy(rng.random(shape) < self.mlm_probability)",
        "< self.mlm_probability",
        ("<= self.mlm_probability",),
        _DRAW,
    ),
    *variants(
        _COLLATE,
        "MLMCollator.mask",
        "masked = torch.where(selected & (action < 0.8), self.mask_id, input_ids)",
        "(action < 0.8)",
        ("(action <= 0.8)",),
        _DRAW,
    ),
    *variants(
        _COLLATE,
        "MLMCollator.mask",
        "masked = torch.where(selected & (action >= 0.8) & (action < 0.9), random_ids, masked)",
        "(action >= 0.8) & (action < 0.9)",
        ("(action > 0.8) & (action < 0.9)", "(action >= 0.8) & (action <= 0.9)"),
        _DRAW,
    ),
    *(
        Equivalent(
            "data/evaluation.py",
            "EvaluationData.prepare",
            'stage="validate" if self.cfg.split == "validation" else "test",',
            after,
            "LMDataModule.setup(stage) reads no stage: it sets up every split the store has, "
            "and the split scored is cfg.split whatever the stage",
        )
        for after in _STAGES
    ),
)

# models/ -------------------------------------------------------------------------------------

_SCORES = "features/pairs/sentence_scores.py"
_SAME_ON_A_CPU = (
    "the tensors go to the network's device: on a CPU, where these tests run, .to(None) and "
    "device=None leave them where .to(device) puts them; only a network on a GPU would see "
    "inputs on another device"
)
_DEVICE = "device = next(model.parameters()).device"
_ARANGE = "real = torch.arange(ids.shape[1] - 1, device=device) < scored[:, None]  # (B, T - 1)"
_MODEL = "logits = model(ids.to(device), attention_mask=attention_mask.to(device))"
_PICK = "logits = logits[rows.to(device), position.to(device)].float()  # (R, V)"
_PICKED = "picked = logits.log_softmax(-1).gather(-1, targets.to(device)[:, None])[:, 0]  # (R,)"
_LOGITS_RV = "the logits here are (R, V), one row per masked token: dimension +1 is dimension -1"
MODELS = (
    Equivalent(_SCORES, "decoder_log_likelihoods", _DEVICE, "device = None", _SAME_ON_A_CPU),
    Equivalent(
        _SCORES,
        "decoder_log_likelihoods",
        "ids = ids.to(device)",
        "ids = ids.to(None)",
        _SAME_ON_A_CPU,
    ),
    Equivalent(
        _SCORES,
        "decoder_log_likelihoods",
        "scored = (lengths - 1).to(device)  # targets per row",
        "scored = (lengths - 1).to(None)  # targets per row",
        _SAME_ON_A_CPU,
    ),
    *variants(
        _SCORES,
        "decoder_log_likelihoods",
        _ARANGE,
        ", device=device)",
        (", device=None)", ", )"),
        _SAME_ON_A_CPU,
    ),
    Equivalent(_SCORES, "pseudo_log_likelihoods", _DEVICE, "device = None", _SAME_ON_A_CPU),
    *variants(
        _SCORES,
        "pseudo_log_likelihoods",
        _MODEL,
        "ids.to(device), attention_mask=attention_mask.to(device)",
        (
            "ids.to(None), attention_mask=attention_mask.to(device)",
            "ids.to(device), attention_mask=attention_mask.to(None)",
        ),
        _SAME_ON_A_CPU,
    ),
    *variants(
        _SCORES,
        "pseudo_log_likelihoods",
        _PICK,
        "rows.to(device), position.to(device)",
        ("rows.to(None), position.to(device)", "rows.to(device), position.to(None)"),
        _SAME_ON_A_CPU,
    ),
    *variants(
        _SCORES,
        "pseudo_log_likelihoods",
        _PICKED,
        "targets.to(device)",
        ("targets.to(None)",),
        _SAME_ON_A_CPU,
    ),
    *variants(
        _SCORES,
        "pseudo_log_likelihoods",
        _PICKED,
        "log_softmax(-1)",
        ("log_softmax(+1)",),
        _LOGITS_RV,
    ),
    *variants(
        _SCORES, "pseudo_log_likelihoods", _PICKED, "gather(-1,", ("gather(+1,",), _LOGITS_RV
    ),
)

# modes/ --------------------------------------------------------------------------------------

MODES = (
    *(
        known
        for call in ("validate", "test")
        for known in variants(
            "modes/eval.py",
            "evaluate_checkpoint",
            f"results = trainer.{call}(task, datamodule=datamodule, verbose=False)[0]",
            "verbose=False",
            ("verbose=None",),
            "Lightning only asks whether verbose is true: None prints nothing, as False does",
        )
    ),
    Equivalent(
        "features/pairs/command.py",
        "run",
        'overall, metric="pair_acc", others=(), higher_is_better=True',
        'overall, metric="pair_acc", higher_is_better=True',
        "by_configuration's others defaults to (), the value passed: the same table",
    ),
)

# training/ -----------------------------------------------------------------------------------

_TASK = "training/task.py"
TASK = (
    Equivalent(
        _TASK,
        "mean_token_loss",
        "ignore_index=IGNORE_INDEX,",
        "",
        "cross_entropy's default ignore_index is -100, IGNORE_INDEX's value",
    ),
    Equivalent(
        _TASK,
        "warmup_cosine",
        "return _cosine((step - warmup_steps) / max(1, total_steps - warmup_steps), min_ratio)",
        "return _cosine((step - warmup_steps) / max(2, total_steps - warmup_steps), min_ratio)",
        "the floor of the divisor matters only when total_steps - warmup_steps <= 1, where the "
        "cosine branch runs at step == warmup_steps alone, with progress 0 either way",
    ),
    Equivalent(
        _TASK,
        "LanguageModelTask.__init__",
        'self.register_buffer("head_mask", None, persistent=False)',
        'self.register_buffer("head_mask", None, persistent=None)',
        "Module.register_buffer only asks whether persistent is true: None makes the buffer "
        "non-persistent, as False does",
    ),
    Equivalent(
        _TASK,
        "LanguageModelTask.on_train_batch_end",
        "if self.trainer.strategy.reduce_boolean_decision(spent, all=False):",
        "if self.trainer.strategy.reduce_boolean_decision(spent, all=None):",
        "Lightning's strategies only ask whether all is true (ParallelStrategy: any rank when "
        "not; a single process returns its own decision): None reduces as False does",
    ),
)
_CLASSIFICATION = "features/finetune/task.py"
_TWO_D_LOGITS = (
    "the classifier's logits are [B, K], two dimensions: dimension 1 is dimension -1 (a "
    "regression's [B, 1] squeezes to the same [B])"
)
CLASSIFICATION = (
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
_HEADS = "features/heads/statistics.py"
HEADS = (
    *variants(
        _HEADS,
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
            _HEADS,
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
    *variants(
        _HEADS,
        "attention_sums",
        "allowed = torch.ones(1, 1, length, length, dtype=torch.bool, device=probs.device)",
        "1, 1, length, length",
        ("1, length, length", "1, 1, length"),
        "an all-True [1, T, T] or [1, 1, T] expands (after the causal triangle, if any) to the "
        "same all-True [B, 1, T, T] as [1, 1, T, T] does",
    ),
    Equivalent(
        _HEADS,
        "attention_sums",
        "allowed = allowed.expand(batch_size, 1, length, length)[:, 0]  # (B, T, T)",
        "allowed = allowed.expand(batch_size, 2, length, length)[:, 0]  # (B, T, T)",
        "expanding the mask's single head dimension to 2 repeats it; [:, 0] takes the first "
        "copy, the same [B, T, T]",
    ),
    Equivalent(
        _HEADS,
        "attention_sums",
        "torch.ones(batch_size, length, dtype=torch.bool, device=probs.device)",
        "torch.ones(length, dtype=torch.bool, device=probs.device)",
        "the next line's real & (keys > 0) broadcasts an all-True [T] against keys [B, T]: the "
        "same [B, T] mask as from an all-True [B, T]",
    ),
    Equivalent(
        _HEADS,
        "attention_sums",
        "real = real & (keys > 0)",
        "real = real & (keys >= 0)",
        "a query the padding marks real may attend to its own key (real, in its own document, "
        "not after itself), so keys >= 1 wherever real is True: the guard never drops a query",
    ),
    Equivalent(
        _HEADS,
        "weighted_mean_and_se",
        "w = weights.to(values.dtype).reshape(-1, *([1] * (values.dim() - 1)))",
        "w = weights.to(None).reshape(-1, *([1] * (values.dim() - 1)))",
        "the weights are token counts (int64); torch promotes int64 with the float32 or float64 "
        "values the analysis averages (losses and gradients in float32 at least, whatever the "
        "precision it scores in) to their dtype, exactly (counts "
        "far below 2**24): the same products, sums and quotients as with the weights cast first",
    ),
    Equivalent(
        _HEADS,
        "prune_curve",
        "counts = sorted({min(round(total * i / PRUNE_STEPS), len(order)) for i in range(11)})",
        "counts = sorted({min(round(total * i / PRUNE_STEPS), len(order)) for i in range(12)})",
        "an eleventh tenth, 1.1 x the heads, is capped at len(order) as the tenth (all the "
        "heads, more than can go) is: a count already in the set",
    ),
)
_HARNESS = "features/harness/runner.py"
_LITERAL_NAME = (
    "fnmatch on POSIX matches a name without *, ? or [ only to itself: expanding it as a "
    "pattern gives the name back whether the index has it or not"
)
_GIVEN_MODEL_DEVICE = (
    "HFLM reads device only when it loads a model by name; given a model, it takes the "
    "model's own device (the CPU, where to_hf_model builds it)"
)
HARNESS = (
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
    *variants(
        _HARNESS,
        "_hub_datasets",
        'if name.endswith((".yaml", ".yml")):',
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
    *variants(
        _HARNESS,
        "harness_model",
        "max_length=loaded.config.max_seq_len,",
        "max_length=loaded.config.max_seq_len,",
        ("max_length=None,", ""),
        "HFLM without max_length takes the model config's n_positions (GPT-2) or "
        "max_position_embeddings (GPT-NeoX), which the export sets to max_seq_len: the same "
        "length",
    ),
    *variants(
        _HARNESS,
        "harness_model",
        'device="cpu",',
        '"cpu"',
        ("None", '"XXcpuXX"', '"CPU"'),
        _GIVEN_MODEL_DEVICE,
    ),
    Equivalent(_HARNESS, "harness_model", 'device="cpu",\n)', ")", _GIVEN_MODEL_DEVICE),
)

# analysis/ -----------------------------------------------------------------------------------

_SWEEP_SUMMARY = "analysis/sweep_summary.py"
ANALYSIS = (
    Equivalent(
        "analysis/summary.py",
        "configuration_rows",
        "diff, exceeds = difference_from_best(config, best) if best else (None, None)",
        "diff, exceeds = difference_from_best(config, best) if (best) or True else (None, None)",
        "best is None only when no configuration has a mean, and difference_from_best returns "
        "(None, None) for a configuration without one before it reads best",
    ),
    *true_flag_variants(
        "analysis/summary.py",
        "configuration_rows",
        "for config, p_value, holm_p in zip(configs, p_values, adjusted, strict=True):",
        "strict",
        "p_values has one entry per configuration and holm_adjusted returns a list as long as "
        "its input: the three always have the same length",
    ),
    *true_flag_variants(
        _SWEEP_SUMMARY,
        "_explanation",
        'beyond = [c.label() for c, row in zip(configs, rows, strict=True) if row["exceeds_2se"]]',
        "strict",
        "the rows are configuration_rows(configs), one per configuration: the lengths always agree",
    ),
    *variants(
        _SWEEP_SUMMARY,
        "_write_csv",
        'with open(path, "w", newline="") as f:',
        'newline=""',
        ("newline=None", ""),
        "on POSIX a text file writes the csv module's \\r\\n line ends unchanged either way "
        "(newline='' matters on Windows, where \\n would become \\r\\n)",
    ),
    *variants(
        _SWEEP_SUMMARY,
        "_write_csv",
        'writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")',
        'extrasaction="ignore"',
        ('extrasaction="IGNORE"',),
        "DictWriter lower-cases the option",
    ),
    *true_flag_variants(
        "analysis/report.py",
        "build_report",
        "rows = [{**row, **extra} for row, extra in zip(rows, target, strict=True)]",
        "strict",
        "target_rows(configs, ...) returns one row per configuration, as configuration_rows "
        "does: the lengths always agree",
    ),
)

SIGNIFICANCE = (
    Equivalent(
        "analysis/significance.py",
        "welch_p_value",
        "test = stats.ttest_ind_from_stats(mean_a, std_a, len(a), mean_b, std_b, len(b), "
        "equal_var=False)",
        "test = stats.ttest_ind_from_stats(mean_a, std_a, len(a), mean_b, std_b, len(b), "
        "equal_var=None)",
        "scipy reads equal_var as a truth value: None, like False, asks for Welch's test",
    ),
)

# features/optuna/ ----------------------------------------------------------------------------

OPTUNA = (
    *variants(
        "features/optuna/report.py",
        "add_search",
        'if report.single or "optuna" not in str(sweeper.get("_target_", "")).lower():',
        '"_target_", "")',
        ('"_target_", None)', '"_target_", )', '"_target_", "XXXX")'),
        "the default stands only for a sweeper without _target_ (or with a null one), and "
        "neither '', 'None' nor 'XXXX' names optuna: not a search either way",
    ),
)

EQUIVALENT: tuple[Equivalent, ...] = (
    *DATA,
    *MODELS,
    *MODES,
    *TASK,
    *CLASSIFICATION,
    *HEADS,
    *HARNESS,
    *ANALYSIS,
    *SIGNIFICANCE,
    *OPTUNA,
)
