"""The attention maps guide's commands in the docs test (tests/docs_lists.py merges these)."""

PROMISES = {
    'python train.py mode=attention ckpt_path=$RUN/checkpoints/best.ckpt prompt="The class"': [
        "$RUN/checkpoints/attention.png"
    ],
}
