"""Which data ``mode=eval`` scores (data/evaluation.py) at its edges: an explicit
``data.source`` decides the kind even where the keys given name two, and the refusal of keys
that name two kinds, whole. Each test kills mutants that the evaluation tests leave alive
(``python -m bench.mutations --module data/evaluation.py``)."""

from __future__ import annotations

import pytest

from data.config import DataConfig
from data.evaluation import data_to_evaluate


def test_an_explicit_source_is_kept_whatever_kinds_the_other_keys_name() -> None:
    asked = DataConfig(source="hub", name="org/set", path="held.txt")
    chosen = data_to_evaluate(DataConfig(), asked, ["data.source", "data.name", "data.path"])
    assert (chosen.cfg.source, chosen.cfg.name, chosen.whole) == ("hub", "org/set", True)


def test_keys_that_name_two_kinds_of_source_are_refused_with_the_way_out() -> None:
    asked = DataConfig(name="org/set", path="held.txt")
    with pytest.raises(ValueError) as error:
        data_to_evaluate(DataConfig(), asked, ["data.name", "data.path"])
    assert str(error.value) == (
        "data.path, data.name name different kinds of source; add data.source=files or hub "
        "to say which to evaluate on"
    )
