"""μP's checks: ``mode=coordcheck`` (the coordinate check: mean |activation| per layer against
width over the first training steps, standard against mup) and, in the report of a sweep over
``model.hidden_size`` and a learning rate, the learning-rate transfer (README.md, this
folder's guide). The parametrization itself is the core's (``model.parametrization``)."""

from conf.features import Feature
from features.mup.config import CoordCheckConfig

FEATURE = Feature(
    name="mup",
    modes={"coordcheck": "features.mup.command"},
    groups={"coordcheck": CoordCheckConfig},
    list_keys=("coordcheck.widths", "coordcheck.parametrizations"),
    report="features.mup.report:add_mup",
    fresh_modes=("coordcheck",),
)
