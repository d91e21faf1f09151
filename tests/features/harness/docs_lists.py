"""The harness guide's commands in the docs test (tests/docs_lists.py merges these)."""

from tests.docs_lists import NETWORK

HUB_TASKS = "python train.py mode=harness ckpt_path=$RUN harness.tasks="  # the Hub's tasks
NOT_RUNNABLE = {
    f"{HUB_TASKS}hellaswag,arc_easy": NETWORK,
    f"{HUB_TASKS}piqa harness.num_fewshot=5": NETWORK,
}
