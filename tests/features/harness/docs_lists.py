"""The harness guide's commands in the docs test (tests/docs_lists.py merges these)."""

import shutil
from pathlib import Path

from tests.conftest import ROOT
from tests.docs_lists import NETWORK


def write_inputs(ws: Path, paragraphs: list[str]) -> None:
    """The guide's example task, where its commands name it (``harness.include=docs/harness``)."""
    shutil.copytree(ROOT / "docs" / "harness", ws / "docs" / "harness")


HUB_TASKS = "python train.py mode=harness ckpt_path=$RUN harness.tasks="  # the Hub's tasks
NOT_RUNNABLE = {
    f"{HUB_TASKS}hellaswag,arc_easy": NETWORK,
    f"{HUB_TASKS}piqa harness.num_fewshot=5": NETWORK,
}
