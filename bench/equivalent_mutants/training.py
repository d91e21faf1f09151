"""The equivalent mutants of training/: the Lightning task, fine-tuning's classifier, the head
analysis and the lm-evaluation-harness adapter."""

from __future__ import annotations

from bench.equivalent_mutants.base import Equivalent, true_flag_variants, variants

SYNC_DIST = (
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
_CLASSIFICATION = "features/finetune/task.py"
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
        for known in true_flag_variants(
            _CLASSIFICATION,
            "ClassificationTask._log_metrics",
            line,
            "sync_dist",
            SYNC_DIST,
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
    *variants(
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
    *variants(
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
_HARNESS = "features/harness/runner.py"
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
    *variants(
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
    *variants(
        _HARNESS,
        "harness_model",
        "max_length=loaded.config.max_seq_len,",
        "max_length=loaded.config.max_seq_len,",
        ("max_length=None,", ""),
        _GIVEN_MODEL_LENGTH,
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
_BATCH_STARTED = "self._batch_started = 0.0"
_HEAD_MASK_BUFFER = 'self.register_buffer("head_mask", None, persistent=False)'
_STOP_DECISION = "if self.trainer.strategy.reduce_boolean_decision(spent, all=False):"
_TASK_EQUIVALENTS = (
    *variants(
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
TRAINING: tuple[Equivalent, ...] = (
    *(
        known
        for line in _LOGGED
        for known in true_flag_variants(
            "training/task.py",
            "LanguageModelTask._log_eval_metrics",
            line,
            "sync_dist",
            SYNC_DIST,
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
    *_CLASSIFICATION_EQUIVALENTS,
    *_HEADS_EQUIVALENTS,
    *_HARNESS_EQUIVALENTS,
    *_TASK_EQUIVALENTS,
)
