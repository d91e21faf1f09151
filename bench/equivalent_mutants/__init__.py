"""The mutants no test can tell from the code (``python -m bench.mutations`` counts them apart
from the real survivors), one module per room of the mutated code, each entry with its reason:
a change nobody can observe, not a gap in the tests (ARCHITECTURE.md, bench/)."""

from __future__ import annotations

from bench.equivalent_mutants.analysis import ANALYSIS
from bench.equivalent_mutants.base import Equivalent
from bench.equivalent_mutants.data import DATA
from bench.equivalent_mutants.models import MODELS
from bench.equivalent_mutants.modes import MODES
from bench.equivalent_mutants.training import TRAINING

EQUIVALENT: tuple[Equivalent, ...] = (*ANALYSIS, *DATA, *MODELS, *MODES, *TRAINING)

__all__ = ["EQUIVALENT", "Equivalent"]
