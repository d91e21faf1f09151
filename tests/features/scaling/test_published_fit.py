"""Our Approach 3 on the points of Besiroglu et al. (2024), "Chinchilla Scaling: A replication
attempt" (arXiv:2404.10102), against their published fit.

Their points (``data/svg_extracted_data.csv`` of github.com/epoch-research/analyzing-chinchilla,
read off Hoffmann et al.'s Figure 4) come with no licence, so they are not redistributed here:
point TINYLM_CHINCHILLA_CSV at a copy of that file to run this test (about 30 s: the whole
grid of 4,500 starts on 240 points). Their procedure, as their notebook ``data_analysis.ipynb``
runs it: D = FLOP / (6N); the 5 points of highest loss left out; the Huber loss (δ = 1e-3) of
log L, L-BFGS-B from the grid, the best converged end kept.
"""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from features.scaling.law import fit_law

SOURCE = os.environ.get("TINYLM_CHINCHILLA_CSV")
# The notebook's "Replicate exactly" cell: the same procedure, L-BFGS-B from the same grid.
THEIR_GRID_FIT = {
    "A": 477.84171252965143,
    "B": 2143.8637880335505,
    "E": 1.817235504463726,
    "alpha": 0.34731265761033453,
    "beta": 0.3671826173946711,
}
# The paper's estimates and their bootstrap standard errors (the notebook's printout): a refit
# of the same Huber loss as a likelihood with a fitted scale (BFGS from Hoffmann et al.'s
# estimates), so not bit for bit the grid's minimum.
PUBLISHED = {
    "A": (482.00572, 124.52232),
    "B": (2085.43420, 1293.28410),
    "E": (1.81686, 0.02566),
    "alpha": (0.34781, 0.01540),
    "beta": (0.36585, 0.02060),
}


@pytest.mark.slow
@pytest.mark.skipif(
    not SOURCE, reason="set TINYLM_CHINCHILLA_CSV to the replication's svg_extracted_data.csv"
)
def test_our_fit_is_the_replications_on_its_points() -> None:
    with Path(SOURCE).open(newline="", encoding="utf-8") as f:
        rows = [
            (float(r["Model Size"]), float(r["Training FLOP"]), float(r["loss"]))
            for r in csv.DictReader(f)
        ]
    assert len(rows) == 245
    cut = sorted(loss for _, _, loss in rows)[-5]  # their filter: loss below the 5th highest
    kept = [(n, flops / (6 * n), loss) for n, flops, loss in rows if loss < cut]
    assert len(kept) == 240
    found = fit_law(*zip(*kept, strict=True), bootstrap=0)
    for name, value in THEIR_GRID_FIT.items():
        # the same minimum: what differs is where L-BFGS-B stops (their objective is not
        # scaled by 1/δ and their gradients are finite differences)
        assert found.params[name] == pytest.approx(value, rel=1e-3), name
    for name, (value, error) in PUBLISHED.items():
        # within a tenth of a standard error of the estimate: agreement far inside the
        # estimate's own uncertainty (the paper rounds to these digits)
        assert abs(found.params[name] - value) < 0.1 * error, name
