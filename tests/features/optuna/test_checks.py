"""The checks of an Optuna search when its multirun starts (``features/optuna/checks.py``):
its counts, its objectives, a key searched and fixed at once, the keys of a search space in a
config file; each answered in one line before any trial (``test_optuna.py`` runs them end to
end)."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from analysis.run_record import Status, run_record
from features.optuna import checks
from features.optuna.checks import check_search
from features.optuna.trial import OPTUNA_SEARCH

pytest.importorskip("optuna")
from features.optuna import study as studies  # noqa: E402


def _hydra(*overrides: str, **settings: object) -> DictConfig:
    """The Hydra config of an Optuna search with ``settings`` (the others the sweeper's
    defaults) and command-line ``overrides``."""
    defaults = OmegaConf.load(Path(checks.__file__).parent / "conf/hydra/sweeper/optuna.yaml")
    sweeper = {**defaults, "_target_": OPTUNA_SEARCH, **settings}
    return OmegaConf.create({"sweeper": sweeper, "overrides": {"task": list(overrides)}})


def test_search_space_in_a_config_file_is_checked() -> None:
    check_search(_hydra(params={"optim.lr": "interval(1e-4,1e-2)"}))
    with pytest.raises(ValueError, match=r"hydra.sweeper.params: .*did you mean optim.lr\?"):
        check_search(_hydra(params={"optim.lrr": "interval(1e-4,1e-2)"}))


def test_a_group_of_the_config_dir_may_be_searched(tmp_path: Path) -> None:
    for choice in ("small", "large"):
        (tmp_path / "size" / f"{choice}.yaml").parent.mkdir(exist_ok=True)
        (tmp_path / "size" / f"{choice}.yaml").write_text("# @package _global_\n")
    search = _hydra(params={"size": "choice(small,large)"})
    with pytest.raises(ValueError, match="unknown key"):
        check_search(search)  # conf/ alone has no group size
    sources = [{"path": str(tmp_path), "schema": "file", "provider": "command-line"}]
    search.runtime = {"config_sources": sources}
    check_search(search)


def test_a_key_searched_and_fixed_on_the_command_line_is_refused() -> None:
    check_search(_hydra("optim.lr=interval(1e-4,1e-2)", "model.dropout=0.1"))
    with pytest.raises(
        ValueError, match=r"optim.lr=3e-3 and optim.lr=interval\(.*not search optim"
    ):
        check_search(_hydra("optim.lr=3e-3", "optim.lr=interval(1e-4,1e-2)"))


def test_every_objective_a_record_can_hold_passes_and_a_mistyped_one_is_refused() -> None:
    numbers = [k for k in checks.OBJECTIVES if k not in checks.CONSUMED]
    record = run_record(
        Status.COMPLETED,
        scores={"val_accuracy": 0.5, "test_mcc": 0.25},
        consumed=dict.fromkeys(checks.CONSUMED, 2),
        **dict.fromkeys(numbers, 1),
    )
    valid = [*checks.OBJECTIVES, "val_accuracy", "test_mcc"]
    check_search(_hydra(objectives=valid))
    # What the check lets through is what the search reads from a job's record.
    values = [1.0] * len(numbers) + [2.0] * len(checks.CONSUMED) + [0.5, 0.25]
    assert studies.objective_values(record, valid) == values
    with pytest.raises(ValueError) as raised:
        check_search(_hydra(objectives=["best_val_loss", "best_val_losss"]))
    assert str(raised.value) == (
        "hydra.sweeper.objectives: best_val_losss is not a number that a job records (did you "
        f"mean best_val_loss?); give some of: {', '.join(checks.OBJECTIVES)}, or a fine-tune's "
        "score (val_NAME, test_NAME)"
    )
    with pytest.raises(ValueError, match=r"^hydra.sweeper.objectives=params is not a list: give "):
        check_search(_hydra(objectives="params"))


@pytest.mark.parametrize("key", list(checks.COUNTS))
@pytest.mark.parametrize("value", [0, -1, 2.5, "ten"])
def test_a_count_of_the_sweeper_below_one_or_not_whole_is_refused(key: str, value: object) -> None:
    check_search(_hydra(**{key: 1}))
    with pytest.raises(ValueError) as raised:
        check_search(_hydra(**{key: value}))
    assert str(raised.value) == (
        f"hydra.sweeper.{key}={value}: give {checks.COUNTS[key]}, a whole number from 1"
    )
