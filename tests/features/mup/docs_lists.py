"""The μP guide's commands in the docs test (tests/docs_lists.py merges these)."""

COORDCHECK = (
    "python train.py mode=coordcheck model.mup_base_width=64 "
    "coordcheck.widths=64,128,256,512 optim.warmup_steps=0"
)
# mode=coordcheck takes no tiny keys (a mode other than train): these make it a few seconds'
# work, one step of one seed at two widths of a one-layer model (the first must be a key the
# guide's command does not name, or none are added; a key named again, the widths, wins as
# the tiny keys do).
MODE_ARGS = {
    "mode=coordcheck": [
        *("coordcheck.steps=1", "coordcheck.seeds=1", "coordcheck.widths=[32,64]"),
        *("model.num_layers=1", "model.max_seq_len=32", "data.vocab_size=300"),
        *("data.batch_size=8", "trainer.precision=32-true"),
    ],
}
PROMISES = {
    COORDCHECK: [
        *("{out}/coordcheck.json", "{out}/coordcheck.md", "{out}/coordcheck.png"),
        *("{out}/metrics.json", "{out}/report.html"),
    ],
}
TRANSFER = (
    "optim=adamw model.mup_base_width=32 model.num_layers=2 model.max_seq_len=64 "
    "model.dropout=0.0 data.tokenizer=char data.batch_size=16 trainer.max_steps=300 "
    "trainer.val_check_interval=100 trainer.precision=32-true logger=none"
)
MEASURED_CHECK = (
    "the coordinate check as measured (widths 64 to 512, 3 seeds: minutes); the guide's command "
    "runs here with MODE_ARGS; composed only"
)
FULL_CHECK = f"{COORDCHECK} model.dropout=0.0"
NOT_RUNNABLE = {
    "python train.py -m model.parametrization=mup,standard model.hidden_size=32,64,128 "
    f"optim.lr=1.25e-3,2.5e-3,5e-3,1e-2,2e-2,4e-2,8e-2 seed=0,1,2 {TRANSFER}": (
        "the transfer measurement: 126 jobs of 300 steps, too long for this test; composed only "
        "(tests/features/mup/test_transfer.py reads a sweep of hand-made records of this shape)"
    ),
    "python train.py -m model.parametrization=mup,standard model.hidden_size=256 "
    f"optim.lr=2.5e-3,5e-3,1e-2,2e-2,4e-2 seed=0,1,2 {TRANSFER}": (
        "the transfer measurement's width 256: 30 jobs, too long for this test; composed only"
    ),
    "python train.py -m model.parametrization=standard model.hidden_size=256 "
    f"optim.lr=6.25e-4,1.25e-3 seed=0,1,2 {TRANSFER}": (
        "the transfer measurement's two lower rates at width 256: 6 jobs; composed only"
    ),
    f"{FULL_CHECK} data.tokenizer=char model.tie_embeddings=false": MEASURED_CHECK,
    f"{FULL_CHECK} data.tokenizer=char model.tie_embeddings=false optim=adamw": MEASURED_CHECK,
    FULL_CHECK: MEASURED_CHECK,
    "python train.py -m model.parametrization=mup model.mup_output_multiplier=1,4,16 "
    "model.hidden_size=32,128 optim.lr=1e-2,2e-2 seed=0,1,2 "
    f"{TRANSFER} hydra/launcher=joblib hydra.launcher.n_jobs=2": (
        "the output multiplier's measurement: 36 jobs; composed only"
    ),
    f"{FULL_CHECK} model.tie_embeddings=false": MEASURED_CHECK,
    "python train.py -m model.parametrization=mup,standard model.hidden_size=32,64,128 "
    "optim.muon_lr=0.005,0.01,0.02,0.04,0.08 seed=0,1,2 model.mup_base_width=32 "
    "model.num_layers=2 model.max_seq_len=64 model.dropout=0.0 data.tokenizer=char "
    "data.batch_size=16 trainer.max_steps=300 trainer.val_check_interval=100 "
    "trainer.precision=32-true logger=none": (
        "the transfer measurement under Muon: 90 jobs of 300 steps; composed only"
    ),
}
