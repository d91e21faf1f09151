"""The ``coordcheck`` group's refusals, each one line that says what was wrong and what to
give instead: widths (not numbers, fewer than two, a width the model refuses, before any
training), steps, seeds, parametrizations, the group given to another mode, and the run
settings the check cannot honour (a budget, a checkpoint); the comma lists read as lists."""

from __future__ import annotations

import pytest

from conf.features import comma_lists
from features.mup.config import CoordCheckConfig
from tests.conftest import compose_config
from train import run


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"widths": [64]}, r"coordcheck.widths=\[64\] needs at least two different widths"),
        ({"widths": [64, 64]}, r"needs at least two different widths to compare"),
        ({"widths": ["wide", 64]}, r"coordcheck.widths has 'wide': give positive whole"),
        ({"widths": [0, 64]}, r"coordcheck.widths has 0: give positive whole hidden sizes"),
        ({"widths": [64.5, 128]}, r"coordcheck.widths has 64.5"),
        ({"steps": 0}, r"coordcheck.steps=0 must be >= 1: the optimiser steps each width"),
        ({"seeds": 0}, r"coordcheck.seeds=0 must be >= 1"),
        ({"steps": "5"}, r"coordcheck.steps='5' has type str; expected int"),
        (
            {"parametrizations": ["mup", "ntk"]},
            r"coordcheck.parametrizations names 'ntk': choose from standard, mup",
        ),
    ],
)
def test_a_bad_setting_is_refused_in_one_line(settings: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        CoordCheckConfig(**settings)
    assert "\n" not in str(raised.value)


def test_widths_and_parametrizations_read_as_sorted_lists() -> None:
    config = CoordCheckConfig(widths="256,64,128", parametrizations="mup")
    assert config.widths == [64, 128, 256] and config.parametrizations == ["mup"]
    assert comma_lists(["coordcheck.widths=32,64", "coordcheck.parametrizations=standard,mup"]) == [
        "coordcheck.widths=[32,64]",
        "coordcheck.parametrizations=[standard,mup]",
    ]


def test_the_group_given_to_another_mode_is_refused() -> None:
    CoordCheckConfig().check_mode("train")  # its defaults: nothing given
    with pytest.raises(ValueError, match=r"^coordcheck.steps is for mode=coordcheck .*: drop"):
        CoordCheckConfig(steps=2).check_mode("train")
    CoordCheckConfig(steps=2).check_mode("coordcheck")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (
            ["coordcheck.widths=[33,64]"],
            r"^coordcheck.widths has 33, which the model refuses: hidden_size=33 is not "
            r"divisible by num_heads=2",
        ),
        (
            ["trainer.budget.flops=1e9"],
            r"^trainer.budget.flops decides a run's length; mode=coordcheck trains "
            r"coordcheck.steps steps",
        ),
        (["ckpt_path=runs/x/checkpoints/best.ckpt"], r"reads no checkpoint: drop ckpt_path$"),
    ],
)
def test_what_the_check_cannot_honour_is_refused_before_training(
    tmp_path, overrides: list[str], message: str
) -> None:
    cfg = compose_config("mode=coordcheck", f"output_dir={tmp_path / 'run'}", *overrides)
    with pytest.raises(ValueError, match=message) as raised:
        run(cfg)
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "run").exists()  # refused before anything was written
