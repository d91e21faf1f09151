"""Scaling laws: the report of a sweep over model sizes and compute fits L(N, D) = E + A/N^α +
B/D^β (Approach 3 as Besiroglu et al. 2024 replicate it, with bootstrap intervals) and the
IsoFLOP parabolas (Approach 2), and predicts the compute-optimal N and D for ``scaling.flops``;
``python -m features.scaling.fit points.csv`` fits a table (README.md, this folder's guide)."""

from conf.features import Feature
from features.scaling.config import ScalingConfig

FEATURE = Feature(
    name="scaling",
    groups={"scaling": ScalingConfig},
    report="features.scaling.report:add_scaling",
)
