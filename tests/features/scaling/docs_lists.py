"""The scaling guide's commands in the docs test (tests/docs_lists.py merges these)."""

NOT_RUNNABLE = {
    "python train.py -m model.hidden_size=32,64,96,128 trainer.budget.flops=1e12,3e12,1e13 "
    "scaling.flops=1e15": (
        "12 jobs, too long for this test; tests/features/scaling/test_scaling_report.py builds "
        "the report of such a sweep from its records and checks the section and figures"
    ),
    "python -m features.scaling.fit points.csv --flops 1e18": (
        "points.csv is the user's table; tests/features/scaling/test_fit_command.py runs the "
        "command on tables it writes"
    ),
    "python train.py -m model.hidden_size=32,48,64,96 trainer.budget.flops=1e11,3e11,9e11,2.7e12 "
    "model.num_layers=2 model.max_seq_len=64 model.dropout=0.0 optim.warmup_steps=10 "
    "data.tokenizer=char data.batch_size=16 trainer.val_check_interval=100 "
    "trainer.precision=32-true logger=none": (
        "the measured equal-FLOPs sweep of docs/benchmarks.md: 16 jobs, 21 minutes here; "
        "composed only"
    ),
}
