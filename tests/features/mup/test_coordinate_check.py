"""``mode=coordcheck`` end to end on a tiny decoder (2 widths, 2 steps, 1 seed, float32): the
files it writes (coordcheck.json's structure, coordcheck.md, coordcheck.png, a run record
that the report reads), its figure and notes in the run's report, and what the check is for:
the standard parametrization's logits grow with width more than μP's, deterministically. Then
the verdicts on hand-made means: μP passed and failed, zero means (0/0 counted as equal, a
zero at the narrowest width unbounded), the standard logits that grow."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from analysis.report import build_report
from analysis.run_record import read_record
from features.mup.verdict import FLAT, judge, markdown, ratio, sentence
from tests.conftest import compose_config
from train import run

WIDTHS = [32, 64]
STEPS = 2
LAYERS = ["embeddings", "block0.attn", "block0.mlp", "block0", "logits"]


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("coordcheck") / "run"
    run(
        compose_config(
            "mode=coordcheck",
            f"coordcheck.widths=[{','.join(map(str, WIDTHS))}]",
            f"coordcheck.steps={STEPS}",
            "coordcheck.seeds=1",
            "model.mup_base_width=32",
            "optim.warmup_steps=0",
            f"output_dir={out}",
        )
    )
    return out


def test_coordcheck_json_has_every_layer_at_every_step_and_width(checked: Path) -> None:
    data = json.loads((checked / "coordcheck.json").read_text())
    assert data["widths"] == WIDTHS and data["steps"] == STEPS and data["seeds"] == [1234]
    assert data["layers"] == LAYERS
    assert list(data["results"]) == ["standard", "mup"]
    for means in data["results"].values():
        assert list(means) == LAYERS
        for per_step in means.values():
            assert len(per_step) == STEPS
            assert all(len(values) == len(WIDTHS) for values in per_step)
            assert all(v > 0 and math.isfinite(v) for values in per_step for v in values)
    # warmup 0, then the cosine over trainer.max_steps=30: the run's first steps
    assert data["lr_multipliers"][0] == 1.0 and 0.99 < data["lr_multipliers"][1] < 1.0
    assert set(data["verdicts"]) == {"standard", "mup"}
    assert data["settings"]["model"]["hidden_size"] == 32  # the run's own, before the widths


def test_the_standard_logits_grow_with_width_more_than_mups(checked: Path) -> None:
    data = json.loads((checked / "coordcheck.json").read_text())
    for step in range(STEPS):
        standard = data["ratios"]["standard"]["logits"][step]
        mup = data["ratios"]["mup"]["logits"][step]
        assert standard > FLAT and mup < standard / 1.25, (step, standard, mup)


def test_the_run_directory_and_its_report_show_the_check(checked: Path) -> None:
    record = read_record(checked)
    assert record["status"] == "completed" and record["mode"] == "coordcheck"
    assert (checked / "coordcheck.png").stat().st_size > 10_000
    table = (checked / "coordcheck.md").read_text()
    assert table.startswith("# Coordinate check") and "## mup" in table
    report = build_report(checked)
    assert [f.title for f in report.figures if "coordinate" in f.title] == ["coordinate check"]
    notes = report.run_notes[checked.name]
    assert [n.split(":")[0] for n in notes] == [
        "coordinate check, standard",
        "coordinate check, mup",
    ]
    assert {"coordcheck.json", "coordcheck.png", "coordcheck.md"} <= set(report.run_files)


def _data(means: dict[str, dict[str, list[list[float]]]]) -> dict:
    return {"widths": [32, 128], "steps": 2, "seeds": [0], "results": means}


def test_mup_passes_within_the_factor_and_fails_beyond_it() -> None:
    flat = {"embeddings": [[1.0, 1.1], [1.0, 0.9]], "logits": [[0.0, 0.0], [0.5, 0.6]]}
    (judgement,) = judge(_data({"mup": flat}))
    assert judgement.flat and judgement.zero_pairs == [("logits", 0)]
    assert judgement.ratios["logits"] == [1.0, pytest.approx(1.2)]
    line = sentence(judgement, [32, 128])
    assert line.startswith("mup: passed, every layer within ×1.25 from width 32 to 128")
    assert "(logits at step 0: zero at every width, 0/0 counted as equal)" in line
    steep = {"embeddings": [[1.0, 1.3], [1.0, 0.7]], "logits": [[0.0, 0.1], [0.5, 0.5]]}
    (judgement,) = judge(_data({"mup": steep}))
    assert judgement.ratios["logits"][0] == math.inf
    line = sentence(judgement, [32, 128])
    assert line.startswith("mup: failed, 3 (layer, step) pairs beyond ×1.25")
    assert "logits at step 0 ×inf (from zero)" in line and "embeddings at step 1 ×0.7" in line
    assert "every other layer" not in line
    shrinking = {"embeddings": [[1.0, 1.1], [1.0, 0.9]], "logits": [[0.9, 0.3], [0.5, 0.45]]}
    (judgement,) = judge(_data({"mup": shrinking}))
    assert sentence(judgement, [32, 128]) == (
        "mup: failed, 1 (layer, step) pairs beyond ×1.25 from width 32 to 128: logits at step 0 "
        "×0.333; every other layer within ×1.25, only the logits shrink with width (μP's 1/m "
        "readout multiplier: the random part of the first steps' logits falls as 1/sqrt(m) "
        "until the learned part outgrows it; see the guide)."
    )


def test_the_standard_verdict_says_whether_the_logits_grow() -> None:
    means = {"logits": [[1.0, 2.0], [1.0, 2.5]], "embeddings": [[1.0, 1.0], [1.0, 1.0]]}
    (judgement,) = judge(_data({"standard": means}))
    assert sentence(judgement, [32, 128]) == (
        "standard: the logits grow from width 32 to 128 (by step: ×2, ×2.5); 2 (layer, step) "
        "pairs beyond ×1.25."
    )
    assert ratio(2.0, 1.0) == 0.5
    table = markdown(_data({"standard": means}), [judgement])
    assert "| logits | 2 * | 2.5 * |" in table and "| embeddings | 1 | 1 |" in table
