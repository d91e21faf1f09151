"""What ``tests/test_docs.py`` runs and how: the documents read, the placeholders and the
commands that produce them, the tiny overrides, the quickest bench options, and the lists of
commands not run (with why), expected to fail (with how) and the files each promises.

A command added to the docs is run by ``tests/test_docs.py`` unless one of these lists names it.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from pathlib import Path

from tests.conftest import ROOT

# The guides, and each feature's own (features/NAME/README.md: removed with its folder).
DOCS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "features").glob("*/README.md")),
]
SHELL_TAGS = ("bash", "console")
OTHER_TAGS = ("text", "yaml", "python")
# A line of a non-shell block that would be a command: it must be in a bash block instead.
SHELL_LOOKING = re.compile(
    r"^\s*(\$ |python3? |pip3? |srun |sbatch |tensorboard |wandb |rm |cd |export |"
    r"[A-Z_][A-Z0-9_]*=\S*\s+\S)"
)
SHAKESPEARE = ROOT.parent / "shared" / "data" / "tinyshakespeare.txt"
SERVER = ROOT / "tests" / "fork_server.py"  # imports tinylm once, forks a child per command

# The placeholder variables, the form of their definition in the docs, and the command of the
# docs whose output directory stands in for them here.
PLACEHOLDERS = {
    "RUN": r"runs/2026-01-01/\d\d-\d\d-\d\d",
    "BERT_RUN": r"runs/2026-01-01/\d\d-\d\d-\d\d",
    "SWEEP": r"multirun/2026-01-01/\d\d-\d\d-\d\d",
}
PRODUCERS = {
    "RUN": "python train.py",
    "BERT_RUN": "python train.py model=bert",
    "SWEEP": "python train.py -m model.num_heads=1,2,4,8 model.dropout=0.0,0.1,0.2",
}

# What a training command gets (see the module docstring): a model of one layer, two steps.
TINY = {
    "model.num_layers": "1",
    "model.hidden_size": "32",
    "model.max_seq_len": "64",
    "data.vocab_size": "300",
    "data.batch_size": "8",
    "data.stream_val_examples": "20",
    "trainer.max_steps": "2",
    "trainer.val_check_interval": "2",
    "trainer.limit_val_batches": "1",
    "trainer.enable_progress_bar": "false",
    "optim.warmup_steps": "1",
    "max_new_tokens": "5",
}
TRAIN_OVERRIDES = [f"{k}={v}" for k, v in TINY.items()] + ["logger=none"]
# A budget decides the steps (trainer.max_steps beside it is refused): the tiny model's cost
# of about three steps instead, so the command still runs in seconds.
TINY_BUDGETS = {
    "trainer.budget.flops": "3e9",
    "trainer.budget.tokens": "1536",
    "trainer.budget.seconds": "2",
}
# The modes that read a checkpoint (every mode but train) take its model: no tiny keys. A
# feature's mode may need arguments of its own to run in seconds (MODE_ARGS, from its
# tests/features/NAME/docs_lists.py).
MODE_ARGS: dict[str, list[str]] = {}

NETWORK = "needs the network (a Hugging Face Hub dataset; offline here)"
INSTALL = "creates a virtual environment and installs from the package index (CI's .ci/run does)"
SUITE = "runs the test suite itself, this file included"
GPU = "needs CUDA GPUs"
SLURM = "needs a SLURM cluster"
# The sweeps that measured the tables of docs/benchmarks.md: sweeps of 3 to 24
# jobs, ~13 s each here even when tiny. Their overrides are parsed and their first job composed
# (test_listed_train_commands_compose); the joblib launcher itself runs in docs/sweeps.md.
MEASUREMENT = "a measurement sweep of 3-24 jobs, too long for this test; composed only"
JOBLIB = "logger=csv hydra/launcher=joblib hydra.launcher.n_jobs=2"
# docs/benchmarks.md, "The default GPT": the default to the README's loss, with the options
DEFAULT_TO_TARGET = (
    "OMP_NUM_THREADS=1 python train.py trainer.val_check_interval=50 trainer.stop_at_loss=3.35"
)
DEFAULT_RECIPE = (
    "model.qk_norm=true model.tie_embeddings=false optim.warmup_steps=0 trainer.max_steps=350"
)
RECIPE_ABLATION = (
    "OMP_NUM_THREADS=1 python train.py -m experiment=shakespeare_char_fast "
    "data.path=path/to/tinyshakespeare.txt seed=1,2,3 trainer.max_steps=300 "
    "trainer.stop_at_loss=1.795 trainer.val_check_interval=25 logger=none"
)
# docs/benchmarks.md, "A second scan": the earlier preset's rates at 270 steps, on Shakespeare;
# the new preset's step counts on the built-in corpus
RECIPE_SCAN = (
    "OMP_NUM_THREADS=1 python train.py -m experiment=shakespeare_char_fast "
    "data.path=path/to/tinyshakespeare.txt seed=1234,1235,1236 logger=none optim.lr=0.014 "
    "optim.muon_momentum=0.95 trainer.max_steps=270 trainer.val_check_interval=270"
)
PRESET_STEPS = (
    "OMP_NUM_THREADS=1 python train.py -m experiment=shakespeare_char_fast data.source=builtin "
    "seed=1234,1235,1236 logger=none trainer.max_steps=260 trainer.val_check_interval=260"
)
MEASUREMENT_SWEEPS = [
    RECIPE_SCAN,
    PRESET_STEPS,
    # docs/benchmarks.md, "What each option pays": the recipe and one option changed, 3 seeds
    f"{RECIPE_ABLATION} model.logit_softcap=null",
    *(
        f"{RECIPE_ABLATION} model.logit_softcap=30{change}"
        for change in (
            "",
            " model.qk_norm=false",
            " model.tie_embeddings=true",
            " optim.muon_momentum_warmup=0",
            " optim.warmup_steps=50",
            " optim.schedule=wsd optim.cooldown_fraction=0.5",
            " model.activation=relu2",
            " model.zero_init_residual=true",
            " model.unet_skips=true",
            " model.value_embeddings=1",
            " model.value_embeddings=2",
            " optim.lr=5e-3",
        )
    ),
    f"python train.py -m optim=adamw model.position=learned optim.lr=1e-3,3e-3 seed=1,2 {JOBLIB}",
    f"python train.py -m optim.lr=3e-3 model.position=learned seed=1,2,3 {JOBLIB}",
    f"python train.py -m optim.lr=3e-3 seed=1,2,3 {JOBLIB}",
    f"python train.py -m optim.lr=3e-3 optim.muon_lr=0.01,0.03 seed=1,2 {JOBLIB}",
    f"python train.py -m optim.lr=1e-3,6e-3,1e-2 seed=1,2 {JOBLIB}",
    f"python train.py -m model=bert seed=1234,1 optim.lr=1e-3,3e-3 {JOBLIB}",
    f"python train.py -m model=bert optim=muon seed=1234,1 optim.lr=1e-3,3e-3 {JOBLIB}",
    "python train.py -m model.hidden_size=64,128 model.num_layers=2 model.max_seq_len=64 "
    "seed=1,2,3 trainer.budget.flops=1e12 trainer.val_check_interval=25 logger=csv",
    "python train.py -m model.hidden_size=64,128 model.num_layers=2 model.max_seq_len=64 "
    "seed=1,2,3 trainer.budget.flops=1e12 trainer.val_check_interval=25 logger=csv "
    "hydra.sweep.dir=$SWEEP summary.target_loss=4.5",
    "python train.py -m model.num_heads=1,2,4,8 model.dropout=0.0,0.1 seed=1,2,3 "
    "model.num_layers=2 model.hidden_size=64 trainer.max_steps=400 "
    f"trainer.val_check_interval=50 optim=adamw model.position=learned {JOBLIB}",
    "python train.py -m model.num_heads=2,4,8 seed=1,2,3 model.num_layers=2 "
    "model.hidden_size=64 trainer.max_steps=150 trainer.val_check_interval=50 optim=adamw "
    "model.position=learned logger=csv",
]
NOT_RUNNABLE = {
    "python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && "
    "pip install -e . && python train.py": INSTALL + "; its last command runs below",
    "python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && "
    'pip install -e ".[dev,launchers,dashboard,hf,eval]" && python -m pytest': INSTALL
    + "; "
    + SUITE,
    'python -m pytest -m "not slow"': SUITE,
    "python train.py trainer=ddp trainer.devices=4": GPU,
    "python train.py trainer=gpu": GPU,
    "srun python train.py trainer=ddp trainer.devices=4 trainer.num_nodes=2": SLURM,
    "python train.py -m hydra/launcher=slurm hydra.launcher.partition=gpu "
    "model.dropout=0.0,0.1 seed=1,2,3": SLURM,
    "python train.py -m hydra/launcher=slurm hydra.launcher.partition=gpu "
    "hydra.launcher.timeout_min=600 model.num_heads=2,4": SLURM,
    "python -m bench.train_step --device cuda": GPU,
    "python train.py trainer.compile=true": (
        "inductor compiles for ~30-80 s on 2 cores even at TINY's size; "
        "tests/training/test_precision.py's slow test trains compiled (trainer=gpu's settings "
        "on the CPU)"
    ),
    "python train.py data=wikitext2": NETWORK,
    "python train.py data=tinystories": NETWORK,
    "python train.py data=tinyshakespeare": NETWORK,
    "python train.py logger.mode=online": "logs to the W&B server: needs an account, the network",
    # Launchers that start fresh interpreters (~10 s of imports each here): the tests named
    # run the same commands end to end and check more than that they exit 0.
    "python train.py -m model.dropout=0.0,0.1 seed=1,2 hydra/launcher=joblib "
    "hydra.launcher.n_jobs=2": (
        "two joblib workers in fresh interpreters; composed only: tests/test_sweeps.py runs a "
        "joblib seed sweep and checks its summary and that the jobs overlapped"
    ),
    "python train.py -m model.dropout=0.0,0.1 hydra/launcher=submitit_local": (
        "each job a fresh interpreter under submitit; composed only: tests/test_sweeps.py runs "
        "this sweep and checks both jobs"
    ),
    "python train.py trainer=cpu_ddp": (
        "two ranks, one a fresh interpreter; composed only: tests/test_ddp.py trains with "
        "trainer=cpu_ddp and checks it logs and checkpoints once"
    ),
    "wandb sync $RUN/wandb/offline-run-*": "uploads to the W&B server: needs an account",
    "tensorboard --logdir $SWEEP": "starts a web server that runs until stopped",
    "python train.py -m model.num_heads=1,2,4,8 model.dropout=0.0,0.1,0.2 "
    "hydra.sweep.dir=$SWEEP sweep.rerun_changed=true": (
        "the re-run above with sweep.rerun_changed=true: on unchanged code it skips every job "
        "as that one does; tests/common/test_provenance.py re-runs a job on changed code"
    ),
    **dict.fromkeys(MEASUREMENT_SWEEPS, MEASUREMENT),
    **dict.fromkeys(
        [
            f"{DEFAULT_TO_TARGET}{change}"
            for change in (
                " optim.muon_momentum_warmup=0",
                "",
                " optim.muon_momentum_warmup=0 model.qk_norm=true",
                f" {DEFAULT_RECIPE}",
                f" {DEFAULT_RECIPE} optim.lr=1e-2 optim.muon_lr=0.03",
            )
        ]
        + [
            "OMP_NUM_THREADS=1 python train.py trainer.val_check_interval=55 "
            "trainer.stop_at_loss=3.35 trainer.max_steps=330"
        ],
        "a measurement run of the default GPT (330-500 steps, minutes on one thread); composed "
        "only: docs/training.md's trainer.stop_at_loss example runs",
    ),
    **dict.fromkeys(
        [
            "OMP_NUM_THREADS=1 python train.py -m seed=1,2 trainer.val_check_interval=50 "
            f"trainer.stop_at_loss=3.35{change}"
            for change in (" optim.muon_momentum_warmup=0", "")
        ],
        MEASUREMENT,
    ),
    "python -m bench.sweep --steps 100": (
        "too long: its quickest run (--steps 2 --jobs 1 2) is three sweeps in fresh processes, "
        "~30 s, a fifth of this file's time; the joblib launcher it times runs in "
        "docs/sweeps.md's parallel example"
    ),
    "python -m bench.data --text big.txt --repeats 3 --ddp": (
        "too long: a 320 MB corpus, 27 train.py processes (DDP ones of 2); no quick mode"
    ),
    "python -m bench.data --text big.txt --ddp": (
        "too long: the same benchmark with its default --repeats 3; no quick mode"
    ),
    "python -m bench.data --text big.txt --repeats 3": (
        "too long: a 320 MB corpus, 3 first runs and 9 warm ones of train.py; no quick mode"
    ),
    "python -m bench.data --text big.txt --tokenizer-loss": (
        "too long: 12 train.py runs on a 320 MB corpus, 6 of them 200 steps; no quick mode"
    ),
    **dict.fromkeys(
        ["python -m tools.mutation", "python -m tools.mutation --module analysis/summary.py"],
        "slow: minutes per module (mutmut, the mutation extra); run by hand",
    ),
}

# Benchmarks that write only in temporary directories of their own: they run in a second fork
# server beside the other commands, which share the scratch directory and run in order.
BESIDE = {
    *("bench.attention", "bench.train_step", "bench.generate", "bench.startup"),
    *("bench.shakespeare_char", "bench.eval", "bench.curves"),
}

# Benchmarks with their quickest options; "{ws}" is the scratch directory.
# docs/benchmarks.md's faster recipe: the previous fast preset, as its overrides.
PREVIOUS_FAST = (
    "optim=muon model.position=rope trainer.max_steps=400 trainer.val_check_interval=200 "
    "optim.lr=5e-3 optim.warmup_steps=50 optim.muon_lr=0.03 optim.muon_momentum_warmup=0"
)
SMALL_TRAIN = ["logger=none", *[f"{k}={v}" for k, v in TINY.items() if k != "max_new_tokens"]]
QUICK = {
    "python -m bench.attention": ["--quick", "--no-memory", "--repeats", "1", "--warmup", "0"],
    "python -m bench.train_step": [
        *("--shape", "shakespeare_char", "--rounds", "1", "--steps", "2", "--warmup", "1"),
        "--no-memory",
    ],
    "OMP_NUM_THREADS=1 python -m bench.train_step --document-mask --shape shakespeare_char "
    "--max-seq-len 64 --rounds 7": [
        *("--document-mask", "--shape", "shakespeare_char", "--max-seq-len", "64"),
        *("--rounds", "1", "--steps", "2", "--warmup", "1", "--no-memory"),
    ],
    "OMP_NUM_THREADS=1 python -m bench.train_step --document-mask --shape shakespeare_char "
    "--max-seq-len 256 --rounds 7": [
        *("--document-mask", "--shape", "shakespeare_char", "--max-seq-len", "256"),
        *("--rounds", "1", "--steps", "2", "--warmup", "1", "--no-memory"),
    ],
    "OMP_NUM_THREADS=1 python -m bench.train_step --shape default --precision bf16-mixed "
    '--candidates lightning "lightning muon" --rounds 3': [
        *("--shape", "shakespeare_char", "--rounds", "1", "--steps", "2", "--warmup", "1"),
        *("--no-memory", "--precision", "bf16-mixed", "--candidates", "lightning"),
        "lightning muon",
    ],
    # Without --compile: inductor would compile for ~30-80 s (tests/training/test_precision.py
    # compiles).
    "OMP_NUM_THREADS=1 python -m bench.train_step --shape shakespeare_char --precision "
    'bf16-mixed --compile --candidates lightning "lightning muon" --rounds 3': [
        *("--shape", "shakespeare_char", "--rounds", "1", "--steps", "2", "--warmup", "1"),
        *("--no-memory", "--precision", "bf16-mixed", "--candidates", "lightning"),
    ],
    "python -m bench.generate --bf16": [
        *("--new-tokens", "8", "--repeats", "1", "--batch-sizes", "1", "--bf16"),
    ],
    "python -m bench.generate": ["--new-tokens", "8", "--repeats", "1", "--batch-sizes", "1"],
    "python -m bench.startup": ["--repeats", "1", "--", *SMALL_TRAIN],
    "python -m bench.curves": ["--steps", "2", "--rounds", "1", "--", *SMALL_TRAIN],
    # Each train.py run of bench.shakespeare_char is a fresh interpreter: its forms run as
    # one, the fullest, whose options include the others'.
    **dict.fromkeys(
        [
            "OMP_NUM_THREADS=1 python -m bench.shakespeare_char --repeats 3 --bare-steps 0 "
            "--versus experiment=shakespeare_char_fast",
            "python -m bench.shakespeare_char",
            "python -m bench.shakespeare_char --repeats 3",
            f"OMP_NUM_THREADS=1 python -m bench.shakespeare_char --repeats 3 --bare-steps 0 "
            f'--versus "{PREVIOUS_FAST}" --versus experiment=shakespeare_char_fast',
        ],
        [
            *("--repeats", "1", "--bare-steps", "0"),
            *("--data", "{ws}/path/to/tinyshakespeare.txt"),
            *("--versus", "experiment=shakespeare_char_fast"),
            *("--versus", "optim=muon model.position=rope", "--", *SMALL_TRAIN),
        ],
    ),
    # The second corpus of the same comparison: the built-in corpus, one quick repeat of the
    # classic preset alone (each --versus is one more fresh interpreter, ~7 s; the form above
    # runs two).
    "OMP_NUM_THREADS=1 python -m bench.shakespeare_char --builtin --repeats 3 --bare-steps 0 "
    f'--versus "{PREVIOUS_FAST}" --versus experiment=shakespeare_char_fast': [
        *("--builtin", "--repeats", "1", "--bare-steps", "0", "--", *SMALL_TRAIN),
    ],
    "python -m bench.data --make-corpus big.txt": ["--make-corpus", "big.txt", "--mb", "1"],
    # On the scratch directory's corpus.txt (big.txt needs the Shakespeare file): one repeat
    # each, no train.py run.
    **dict.fromkeys(
        [
            "python -m bench.data --text big.txt --wordpiece-cost --repeats 4",
            "python -m bench.data --text big.txt --wordpiece-cost --repeats 4 --first-runs 0",
        ],
        ["--text", "{ws}/corpus.txt", "--wordpiece-cost", "--repeats", "1", "--first-runs", "0"],
    ),
    "python -m bench.eval --max-chars 150000 --threads 1": [
        *("--max-chars", "3000", "--threads", "1", "--train-steps", "1"),
        *("--shakespeare", "{ws}/path/to/tinyshakespeare.txt"),
    ],
}

# Commands the docs show failing: (exit code, text the output must hold; None: the lines the
# console transcript shows under the command).
FAILS = {
    "python train.py model.num_heads=3": (1, None),
    "python train.py model.num_head=4": (1, None),
    "python train.py model=gtp": (1, None),
    "python train.py trainer.precision=16-mixed": (1, None),
    "TINYLM_DEBUG=1 python train.py model.num_heads=3": (1, "Traceback"),
}

# Files a command promises, relative to the scratch directory ("{out}": its output directory).
PROMISES = {
    "python train.py": [
        *("{out}/checkpoints/best.ckpt", "{out}/checkpoints/last.ckpt", "{out}/metrics.json"),
        *("{out}/tokenizer.json", "{out}/.hydra/config.yaml", "{out}/train.log"),
    ],
    "python train.py logger=csv": ["{out}/csv/metrics.csv"],
    "python train.py logger=tensorboard": ["{out}/tensorboard"],
    "python train.py hydra.run.dir=runs/first-try": ["runs/first-try/metrics.json"],
    PRODUCERS["SWEEP"]: [
        *("{out}/summary.md", "{out}/summary.csv", "{out}/runs.csv"),
        *("{out}/heatmap_val_loss.png", "{out}/curves_val_loss.png", "{out}/11/metrics.json"),
    ],
    "python train.py mode=eval ckpt_path=$RUN": ["$RUN/eval.jsonl"],
    "python train.py mode=eval ckpt_path=$SWEEP": ["$SWEEP/eval.jsonl"],
    "python train.py mode=export ckpt_path=$RUN/checkpoints/best.ckpt": [
        "$RUN/checkpoints/best.safetensors"
    ],
    "python train.py mode=export ckpt_path=$RUN/checkpoints/best.ckpt export.format=hf": [
        "$RUN/checkpoints/best-hf/config.json"
    ],
    "python train.py mode=export ckpt_path=$RUN/checkpoints/last.ckpt "
    "export.path=exported/last.safetensors": ["exported/last.safetensors"],
    "python -m bench.data --make-corpus big.txt": ["big.txt"],
    "TINYLM_CACHE=.cache/tinylm python train.py": [".cache/tinylm"],
}


# The small files a feature's guide names, written into the scratch directory beside the
# core's: each feature's ``write_inputs(ws, paragraphs)`` (paragraphs of the built-in corpus).
INPUT_WRITERS: list[Callable[[Path, list[str]], None]] = []


def _merge_features() -> None:
    """Each feature's entries (tests/features/NAME/docs_lists.py) for the commands of its
    guide: removed with its folder, as the guide is."""
    for path in sorted((ROOT / "tests" / "features").glob("*/docs_lists.py")):
        own = importlib.import_module(f"tests.features.{path.parent.name}.docs_lists")
        for table in (PLACEHOLDERS, PRODUCERS, NOT_RUNNABLE, QUICK, FAILS, PROMISES, MODE_ARGS):
            name = next(k for k, v in globals().items() if v is table)
            table.update(getattr(own, name, {}))
        BESIDE.update(getattr(own, "BESIDE", ()))
        if hasattr(own, "write_inputs"):
            INPUT_WRITERS.append(own.write_inputs)


_merge_features()
