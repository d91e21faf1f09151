"""A run's page: its four curves drawn from its ``curves.jsonl`` (a point per logged step), a
resumed run's resume point marked, what the run is (the changed settings, then all of them
folded; the model's size; where the time went), links only to files that exist, and no word
of a sweep; read from the HTML and in a real browser."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from analysis.run_record import read_record, write_record
from features.report.page import REPORT_FILE, write_report
from features.report.run_curves import smoothed
from modes import Interrupted
from tests.faults import SignalAtStep
from tests.features.report.browser import CHROMIUM, Browser
from tests.features.report.pages import (
    SWEEP_WORDS,
    browser_facts,
    dead_links,
    missing_points,
    page_facts,
)
from train import run
from training.curves import CURVES_FILE, read_curves

RESUME_AT = 11


@pytest.fixture
def tiny_run(tiny_ckpt: Path) -> Path:
    """The session's tiny run directory (16 steps, the training loss logged every 5)."""
    return tiny_ckpt.parents[1]


@pytest.fixture(scope="module")
def resumed_run(tmp_path_factory) -> Path:
    """A run stopped by a signal at step 11, then resumed in its directory to step 24."""
    from tests.conftest import compose_config

    out = tmp_path_factory.mktemp("resumed") / "run"
    steps = [f"output_dir={out}", "trainer.max_steps=24", "trainer.val_check_interval=8"]
    with pytest.raises(Interrupted):
        run(compose_config(*steps), [SignalAtStep(RESUME_AT, signal.SIGTERM)])
    run(compose_config(*steps, f"ckpt_path={out / 'checkpoints' / 'last.ckpt'}"))
    return out


def test_a_run_page_draws_every_logged_step_and_links_only_its_files(tiny_run: Path) -> None:
    facts = page_facts(tiny_run / REPORT_FILE)
    assert dead_links(facts) == []
    assert missing_points(facts, {"0": [tiny_run]}) == []
    titles = [f["title"] for f in facts["figures"]]
    assert len(titles) == 4 and not any("band" in t or "mean" in t for t in titles)
    html = (tiny_run / REPORT_FILE).read_text()
    assert 'href="eval.jsonl"' not in html  # no evaluation has run


def test_a_run_page_says_what_the_run_is(tiny_run: Path) -> None:
    """(The changed settings of a run from the command line: tests/features/report/
    test_report.py's sweep job.)"""
    html = (tiny_run / REPORT_FILE).read_text()
    record = read_record(tiny_run)
    assert f"with {record['params']:,} parameters" in html
    folded = html[html.index('<details id="settings">') :].split("</details>")[0]
    assert (
        "<td>model.norm</td><td>pre</td>" in folded
        and "<td>trainer.max_steps</td><td>16<" in folded
    )
    time = html[html.index('<dd id="time">') :].split("</dd>")[0]
    for part in ("data and tokenizer", "training", "validation", "sample"):
        assert f"{part} " in time
    for word in SWEEP_WORDS:
        assert word not in html, word


def test_a_resumed_run_page_marks_the_resume_in_every_curve(resumed_run: Path) -> None:
    lines = read_curves(resumed_run / CURVES_FILE)
    assert {"step": RESUME_AT, "resumed": True} in lines
    facts = page_facts(resumed_run / REPORT_FILE)
    assert dead_links(facts) == []
    assert missing_points(facts, {"0": [resumed_run]}) == []
    assert all(f["lines"].get("resume-1") == 2 for f in facts["figures"])
    assert f"resumed at step {RESUME_AT}" in (resumed_run / REPORT_FILE).read_text()


def test_links_are_to_files_that_exist(tiny_run: Path, tmp_path: Path) -> None:
    """A run's evaluations are linked once their files exist; a run from before curves.jsonl
    still shows its recorded validation curve."""
    copy = tmp_path / "run"
    (copy / "checkpoints").mkdir(parents=True)
    record = read_record(tiny_run)
    write_record(copy, record)
    html = write_report(copy).read_text()
    assert 'href="curves.jsonl"' not in html and 'href="eval.jsonl"' not in html
    (figure,) = page_facts(copy / REPORT_FILE)["figures"]
    assert figure["title"] == "validation loss"
    assert figure["lines"]["val-loss"] == len(record["val_curve"])
    (copy / "eval.jsonl").write_text("")
    (copy / "checkpoints" / "eval.jsonl").write_text("")
    html = write_report(copy).read_text()
    assert 'href="eval.jsonl"' in html and 'href="checkpoints/eval.jsonl"' in html
    assert dead_links(page_facts(copy / REPORT_FILE)) == []


def test_the_smoothed_loss_is_tensorboards_debiased_average() -> None:
    assert smoothed([4.0]) == [4.0]  # not pulled towards zero
    assert smoothed([4.0, 2.0], weight=0.5) == pytest.approx([4.0, (0.25 * 4 + 0.5 * 2) / 0.75])


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
def test_a_browser_shows_the_run_pages_curves_and_follows_their_links(
    tiny_run: Path, resumed_run: Path, tmp_path: Path
) -> None:
    browser = Browser(tmp_path / "profile")
    try:
        for run_dir in (tiny_run, resumed_run):
            facts = browser_facts(browser, run_dir / REPORT_FILE)
            assert dead_links(facts) == []
            assert missing_points(facts, {"0": [run_dir]}) == []
            for word in SWEEP_WORDS:
                assert word not in facts["text"], word
        assert browser.errors == []
    finally:
        browser.close()


def test_a_sweep_page_draws_the_best_configurations_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Beyond its limit of configurations, a sweep's page leaves out the worst ones' curves
    and says so; a value that was not finite (a diverged loss, written as text) is no point."""
    import features.report.run_curves as run_curves

    monkeypatch.setattr(run_curves, "MAX_CONFIGURATIONS", 1)
    for job, (lr, loss) in enumerate([("0.1", 3.0), ("0.01", 2.0)]):
        record = {"status": "completed", "best_val_loss": loss, "overrides": {"optim.lr": lr}}
        write_record(tmp_path / str(job), record)
        lines = [{"step": s, "train/loss": loss + 1 / s} for s in (1, 2, 3)]
        lines.append({"step": 4, "train/loss": "nan"})
        (tmp_path / str(job) / CURVES_FILE).write_text("".join(json.dumps(x) + "\n" for x in lines))
    html = write_report(tmp_path).read_text()
    assert (
        '<option value="0">optim.lr=0.01 (n=1)</option>' in html and "optim.lr=0.1 (n" not in html
    )
    assert "left out: the curves of the 1 configuration with the worst results" in html
    (figure,) = page_facts(tmp_path / REPORT_FILE)["figures"][:1]
    assert figure["title"].startswith("optim.lr=0.01: training loss")
    assert figure["lines"]["train-loss"] == 3  # the three finite values
