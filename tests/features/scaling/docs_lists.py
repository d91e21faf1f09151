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
}
