"""Which data ``mode=eval`` scores (data/evaluation.py) at its edges: an explicit
``data.source`` decides the kind even where the keys given name two, and the refusal of keys
that name two kinds, whole. Each test kills mutants that the evaluation tests leave alive
(``python -m tools.mutation --module data/evaluation.py``)."""

from __future__ import annotations

import pytest

from data.config import DataConfig
from data.evaluation import data_to_evaluate


def test_another_kind_of_source_drops_the_runs_own_source_keys() -> None:
    trained = DataConfig(path="train.txt", text_column="body")
    asked = DataConfig(source="hub", name="org/set")
    chosen = data_to_evaluate(trained, asked, ["data.source", "data.name"])
    assert (chosen.cfg.source, chosen.cfg.name, chosen.whole) == ("hub", "org/set", True)
    assert (chosen.cfg.path, chosen.cfg.text_column) == (None, "text")  # not the run's file


def test_keys_that_name_two_kinds_of_source_are_refused_with_the_way_out() -> None:
    with pytest.raises(ValueError) as error:
        DataConfig(name="org/set", path="held.txt")
    assert str(error.value) == (
        "data.path, data.name name different kinds of source; add data.source=files or hub "
        "to say which to read"
    )
