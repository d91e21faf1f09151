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
NOT_RUNNABLE = {
    "python train.py -m model.parametrization=standard,mup model.mup_base_width=32 "
    "model.hidden_size=32,64,128 optim=adamw optim.lr=1e-3,3e-3,1e-2,3e-2 "
    "optim.warmup_steps=30 seed=0,1,2 model.num_layers=2 trainer.max_steps=300 "
    "trainer.val_check_interval=50 logger=csv hydra/launcher=joblib hydra.launcher.n_jobs=2": (
        "the transfer measurement: 72 jobs of 300 steps, too long for this test; composed only "
        "(tests/features/mup/test_transfer.py reads a sweep of hand-made records of this shape)"
    ),
}
