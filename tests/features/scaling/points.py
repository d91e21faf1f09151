"""Points drawn from a known scaling law, shared by the scaling feature's tests."""

from __future__ import annotations

import numpy as np

TRUE = {"E": 1.7, "A": 400.0, "B": 2000.0, "alpha": 0.35, "beta": 0.37}
SIZES = np.geomspace(1e6, 1e8, 5)
TOKENS = np.geomspace(1e8, 1e10, 4)


def law_points(noise: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(N, D, L) on the grid of SIZES x TOKENS, L from TRUE times lognormal noise of ``noise``
    (the standard deviation of log L)."""
    n, d = np.repeat(SIZES, len(TOKENS)), np.tile(TOKENS, len(SIZES))
    exact = TRUE["E"] + TRUE["A"] / n ** TRUE["alpha"] + TRUE["B"] / d ** TRUE["beta"]
    return n, d, exact * np.exp(np.random.default_rng(seed).normal(0, noise, len(n)))
