"""The equivalent mutants of data/: the collation of blocks and masks, and the evaluation data."""

from __future__ import annotations

from bench.equivalent_mutants.base import Equivalent, variants

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
_DRAW = (
    "rng.random draws from [0, 1) in steps of 2**-53: a draw equal to the threshold has a "
    "chance of about 1e-16 per token"
)
_COLLATE = (
    *(
        known
        for line in (
            '"input_ids": batch[:, :-1].clone(memory_format=torch.contiguous_format),',
            '"labels": batch[:, 1:].clone(memory_format=torch.contiguous_format),',
        )
        for known in variants(
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
    *variants(
        "data/collate.py",
        "MLMCollator.__init__",
        "is_regular = torch.ones(vocab_size, dtype=torch.bool)",
        "dtype=torch.bool)",
        ("dtype=None)", ")"),
        "a float mask of ones with the specials set to 0 has the same nonzero() indices",
    ),
    *variants(
        "data/collate.py",
        "MLMCollator.__call__",
        "input_ids = torch.full((len(examples), length), self.pad_id, dtype=torch.long)",
        "dtype=torch.long)",
        ("dtype=None)", ")"),
        "torch.full infers int64 (torch.long) from the integer pad id",
    ),
    *variants(
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
    *variants(
        "data/collate.py",
        "MLMCollator.mask",
        "masked = torch.where(selected & (action >= 0.8) & (action < 0.9), random_ids, masked)",
        "(action >= 0.8) & (action < 0.9)",
        ("(action > 0.8) & (action < 0.9)", "(action >= 0.8) & (action <= 0.9)"),
        _DRAW,
    ),
)
DATA: tuple[Equivalent, ...] = (
    *_COLLATE,
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
)
