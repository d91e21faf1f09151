"""Re-running a record: ``mode=reproduce ckpt_path=RUN`` trains a run (or a sweep's jobs) again
from what its run record holds, in a fresh process, and says which numbers still stand
(README.md here)."""

from conf.features import Feature
from features.reproduce.config import ReproduceConfig

FEATURE = Feature(
    name="reproduce",
    modes={"reproduce": "features.reproduce.command"},
    groups={"reproduce": ReproduceConfig},
    list_keys=("reproduce.jobs",),
    report="features.reproduce.report:add_reproductions",
)
