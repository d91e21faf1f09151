"""The Optuna search's commands in the docs test (tests/docs_lists.py merges these)."""

from tests.docs_lists import SLURM

POSTGRES_SEARCH = (
    "hydra.sweeper.storage=postgresql://tinylm@dbhost/tinylm hydra.sweeper.study_name=lr-dropout "
    "'optim.lr=tag(log,interval(1e-4,1e-2))' 'model.dropout=interval(0.0,0.3)' "
    "hydra.sweep.dir=/shared/searches/lr-dropout"
)
NOT_RUNNABLE = {
    # docs/benchmarks.md, "A faster recipe found with our own search"
    "OMP_NUM_THREADS=1 python train.py -m experiment=shakespeare_char optim=muon "
    "model.position=rope data.path=path/to/tinyshakespeare.txt hydra/sweeper=optuna "
    "hydra.sweeper.n_trials=120 hydra.sweeper.sampler.seed=0 hydra.sweeper.n_jobs=2 "
    "hydra/launcher=joblib hydra.launcher.n_jobs=2 'hydra.sweeper.objectives=[seconds_to_target]' "
    "hydra.sweeper.pruner=median trainer.stop_at_loss=1.795 trainer.val_check_interval=25 "
    "logger=none 'trainer.max_steps=range(200,476,25)' 'optim.lr=tag(log,interval(2e-3,2e-2))' "
    "'optim.muon_lr=tag(log,interval(0.01,0.08))' 'optim.warmup_steps=choice(0,25,50,100)' "
    "'model.qk_norm=choice(true,false)' 'model.activation=choice(gelu,relu2)' "
    "'model.zero_init_residual=choice(true,false)' 'model.logit_softcap=choice(15.0,30.0,100.0)' "
    "'model.tie_embeddings=choice(true,false)' 'optim.schedule=choice(cosine,wsd)' "
    "'optim.cooldown_fraction=interval(0.1,0.6)' 'optim.muon_momentum_warmup=choice(0,100,300)'": (
        "the recipe search: 120 trials of up to 475 steps, 25 min here; composed only (the "
        "search tests run and prune searches, tests/features/optuna/test_optuna.py the "
        "time-to-target objective)"
    ),
    **dict.fromkeys(
        [
            "python train.py -m hydra/sweeper=optuna hydra/launcher=slurm "
            "hydra.launcher.partition=gpu hydra.sweeper.n_jobs=8 hydra.sweeper.n_trials=64 "
            f"{POSTGRES_SEARCH}",
            f"srun python train.py -m hydra/sweeper=optuna hydra.sweeper.n_jobs=1 "
            f"hydra.sweeper.n_trials=64 {POSTGRES_SEARCH}",
        ],
        SLURM + " and a PostgreSQL server; the search tests shares a study (SQLite) "
        "between two workers",
    ),
    "python train.py -m hydra/sweeper=optuna hydra.sweeper.n_trials=6 "
    "'optim.lr=tag(log,interval(1e-4,1e-2))' hydra.sweep.dir=runs/search": (
        "one of two workers, a search like the one above; the search tests runs two "
        "workers on one study"
    ),
    **dict.fromkeys(
        [
            "python train.py -m hydra/sweeper=optuna hydra.sweeper.n_trials=20 "
            "hydra.sweeper.sampler.seed=0 hydra.sweeper.n_jobs=1 "
            "'optim.lr=tag(log,interval(1e-4,3e-2))' 'model.dropout=interval(0.0,0.3)' "
            "model.num_layers=1 model.hidden_size=32 model.num_heads=2 model.max_seq_len=32 "
            "data.vocab_size=300 data.batch_size=8 trainer.max_steps=80 "
            "trainer.val_check_interval=10 trainer.limit_val_batches=4 "
            f"trainer.precision=32-true max_new_tokens=10 logger=none hydra.sweeper.pruner={p}"
            for p in ("none", "median")
        ],
        "a measurement search of 20 trials, ~12 min here; composed only: the search tests "
        "prunes a search",
    ),
    "optuna-dashboard sqlite:///$SWEEP/study.db": (
        "starts a web server that runs until stopped; the search tests starts it on a "
        "study, reads its HTTP API and stops it"
    ),
    "python train.py -m hydra/sweeper=optuna hydra/sweeper/sampler=nsgaii "
    "hydra.sweeper.n_trials=12 'hydra.sweeper.objectives=[best_val_loss,params]' "
    "'hydra.sweeper.directions=[minimize,minimize]' 'model.hidden_size=choice(64,128)' "
    "'model.num_heads=choice(1,2,4)'": (
        "a search of 12 trials, ~20 s even when tiny; the search tests runs a "
        "two-objective search and checks its front"
    ),
}
PROMISES = {
    "python train.py -m hydra/sweeper=optuna hydra.sweeper.n_trials=6 hydra.sweeper.sampler.seed=0 "
    "'optim.lr=tag(log,interval(1e-4,1e-2))' 'model.dropout=interval(0.0,0.3)'": [
        *("{out}/optimization_results.yaml", "{out}/5/metrics.json", "{out}/curves_val_loss.png"),
        *("{out}/study.db", "{out}/search.json"),
    ],
}
