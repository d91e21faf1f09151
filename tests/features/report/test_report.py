"""report.html: every number of a small real sweep's page equals its records, the page needs
nothing but itself, text from runs stays text, and a real browser opens, sorts and draws it;
each configuration's curves (a point per logged step) are chosen in a list, every link is a
file, and a job's own page is a run's page (tests/features/report/test_run_page.py).

One sweep is trained once for the module (2 dropouts x 2 seeds, a few steps), then evaluated
on text and on minimal pairs, one job fine-tuned (on a task whose class name is planted
markup) and every job's heads analysed: each command rewrites the page.
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.image
import pytest

from analysis.report import build_report
from analysis.run_record import read_record, write_record
from analysis.sweep_summary import write_summary_files
from common.provenance import code_version
from features.report.page import (
    REPORT_FILE,
    column_groups,
    heatmaps,
    write_page,
    write_report,
)
from tests.conftest import ROOT, TINY, compose_config, train_py
from tests.features.report.browser import CHROMIUM, Browser
from tests.features.report.pages import (
    SWEEP_WORDS,
    browser_facts,
    dead_links,
    missing_points,
    page_facts,
)
from train import run

SWEEP = ["model.dropout=0.0,0.1", "seed=1,2"]
SHORT = ["model.max_seq_len=64", "trainer.max_steps=4", "trainer.val_check_interval=2"]
SHORT += ["trainer.log_every_n_steps=2"]  # the training's curves: two points each
# A validation split of ~1,000 tokens: what the eval and the head analysis score.
SMALL_VALIDATION = ["trainer.limit_val_batches=2", "data.val_fraction=0.003"]
PLANTED = {
    "error": "<img src=x onerror=\"window.pwned='error'\">",
    "swept": "<script>window.pwned='swept'</script>",
    "class": "<script>window.pwned='class'</script>",
}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    """The sweep directory after training, eval (text, pairs), a fine-tune of job 0 and
    mode=heads; its fine-tune's run directory is ``sweep.parent / 'ft'``."""
    for feature in ("pairs", "finetune", "heads"):  # the page of every command: all of them
        if not (ROOT / "features" / feature).is_dir():
            pytest.skip(f"the report of every command needs features/{feature}")
    root = tmp_path_factory.mktemp("report")
    sweep = root / "sweep"
    trained = train_py(
        "-m", *TINY, *SHORT, *SMALL_VALIDATION, *SWEEP, f"hydra.sweep.dir={sweep}",
        cwd=root,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-3000:]

    def command(mode: str, ckpt: Path, *overrides: str) -> dict:
        cfg = compose_config(
            f"mode={mode}", f"ckpt_path={ckpt}", f"output_dir={root / 'ft'}", *overrides
        )
        return run(cfg)

    command("eval", sweep, "model.max_seq_len=64")
    command("pairs", sweep, "model.max_seq_len=64", "pairs.path=builtin")
    task = root / "task.jsonl"
    labels = ["yes", PLANTED["class"]]
    texts = ["bad poor text", "good fine text"]
    task.write_text(
        "".join(
            json.dumps({"text": f"{texts[i % 2]} {i}", "label": labels[i % 2]}) + "\n"
            for i in range(24)
        )
    )
    command(
        "finetune",
        sweep / "0" / "checkpoints" / "best.ckpt",
        "finetune.task=files",
        f"finetune.path={task}",
        "finetune.max_steps=2",
        "finetune.batch_size=8",
    )
    run(compose_config(
        "mode=heads", f"ckpt_path={sweep}", "model.max_seq_len=64",
        f"output_dir={root / 'heads'}",
    ))  # fmt: skip
    return sweep


class _Page(HTMLParser):
    """The results table of a report: per row, its label and its cells' data attributes by
    column key; and every attribute value of the page."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.keys: list[str | None] = []
        self.rows: list[dict] = []
        self.attributes: list[tuple[str, str]] = []
        self._table = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attrs = dict(attrs)
        self.attributes += [(k, v or "") for k, v in attrs.items()]
        if tag == "table":
            self._table = attrs.get("id")
        if self._table != "results":
            return
        if tag == "th":
            self.keys.append(attrs.get("data-key"))
        elif tag == "tr" and "data-label" in attrs:
            self.rows.append({"label": attrs["data-label"], "cells": {}, "index": 0})
        elif tag == "td" and self.rows:
            row = self.rows[-1]
            key = self.keys[row["index"]]
            row["index"] += 1
            if key is not None and "data-mean" in attrs:
                row["cells"][key] = attrs

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._table = None


def _recorded(sweep: Path) -> dict[str, dict[str, float]]:
    """Column key -> run -> value, read from the record files without the report's code."""
    values: dict[str, dict[str, float]] = {}
    runs = sorted(p.name for p in sweep.iterdir() if (p / "metrics.json").is_file())
    for name in runs:
        metrics = json.loads((sweep / name / "metrics.json").read_text())
        values.setdefault("best_val_loss", {})[name] = metrics["best_val_loss"]
        values.setdefault("val_bpb", {})[name] = metrics["val_bpb"]
        heads = json.loads((sweep / name / "checkpoints" / "heads.json").read_text())
        values.setdefault("heads_90", {})[name] = statistics.fmean(heads["heads_for_90"])
        values.setdefault("pruned_half_loss", {})[name] = heads["pruned_half_loss"]
    files = [sweep / "eval.jsonl", *(sweep / n / "checkpoints" / "eval.jsonl" for n in runs)]
    for path in files:
        for line in path.read_text().splitlines() if path.is_file() else []:
            record = json.loads(line)
            name = Path(record["checkpoint"]).parents[1].name
            if record.get("evaluation") == "finetune":
                key = f"finetune:{record['task']} ({record['init']}) {record['metric']}"
                values.setdefault(key, {})[name] = record["value"]
            elif "pairs" in record:
                key = f"pairs:{record['pairs']} pairs: {record['paradigm']}"
                values.setdefault(key, {})[name] = record["pair_acc"]
            else:
                for metric in ("loss", "bpb"):
                    key = f"eval:{record['data']} {record['split']}:{metric}"
                    values.setdefault(key, {})[name] = record[metric]
    return values


def _copy(sweep: Path, where: Path) -> Path:
    """A copy of the sweep whose records name the copy's checkpoints."""
    shutil.copytree(sweep, where)
    for path in where.rglob("eval.jsonl"):
        path.write_text(path.read_text().replace(str(sweep), str(where)))
    return where


def _mismatches(sweep: Path) -> list[str]:
    """Every cell of the page whose mean, std or n is not what the records give."""
    page = _Page((sweep / REPORT_FILE).read_text())
    recorded = _recorded(sweep)
    groups: dict[str, list[str]] = {}
    for name in recorded["best_val_loss"]:
        overrides = read_record(sweep / name)["overrides"]
        groups.setdefault(f"model.dropout={overrides['model.dropout']}", []).append(name)
    wrong = []
    assert set(recorded) == {k for k in page.keys if k}, "the columns are the recorded metrics"
    assert [row["label"] for row in page.rows] == list(groups)
    for row in page.rows:
        for key, by_run in recorded.items():
            values = [by_run[name] for name in groups[row["label"]] if name in by_run]
            cell = row["cells"].get(key)
            if not values:
                wrong += [f"{row['label']} {key}: a cell without records"] if cell else []
                continue
            std = statistics.stdev(values) if len(values) > 1 else None
            shown = (float(cell["data-mean"]), cell["data-std"], int(cell["data-n"]))
            if shown != (statistics.fmean(values), "" if std is None else repr(std), len(values)):
                wrong.append(f"{row['label']} {key}: page {shown}, records {values}")
    return wrong


def test_every_number_of_the_page_is_its_records_and_a_planted_value_is_caught(
    sweep: Path, tmp_path: Path
) -> None:
    page = _Page((sweep / REPORT_FILE).read_text())
    kinds = {key.split(":")[0] for key in page.keys if key}
    assert {"best_val_loss", "eval", "pairs", "finetune", "heads_90", "pruned_half_loss"} <= kinds
    assert _mismatches(sweep) == []
    planted = _copy(sweep, tmp_path / "sweep")
    write_report(planted)
    assert _mismatches(planted) == []  # the copy's own page
    lines = (planted / "eval.jsonl").read_text().splitlines()
    record = json.loads(lines[0])
    record["loss" if "loss" in record else "pair_acc"] += 0.125
    (planted / "eval.jsonl").write_text("\n".join([json.dumps(record), *lines[1:]]) + "\n")
    (wrong,) = _mismatches(planted)  # the page still shows the value before the plant
    assert "eval:" in wrong or "pairs:" in wrong


def test_each_command_rewrote_the_page_and_the_runs_record_provenance(sweep: Path) -> None:
    page = (sweep / REPORT_FILE).read_text()
    assert "4 completed" in page and "0 failed" in page and "0 pruned" in page
    for job in "0123":
        metrics = read_record(sweep / job)
        assert metrics["provenance"]["code"] == code_version()
        assert metrics["provenance"]["precision"] == "32-true"
        assert (sweep / job / REPORT_FILE).is_file()  # each run's own page
    run_page = (sweep / "0" / REPORT_FILE).read_text()
    assert "fine-tuning" in run_page and "heads" in run_page  # finetune and heads rewrote it
    assert "Sample" in run_page
    for line in (sweep / "eval.jsonl").read_text().splitlines():
        assert json.loads(line)["provenance"]["code"] == code_version()
    heads = json.loads((sweep / "0" / "checkpoints" / "heads.json").read_text())
    assert heads["provenance"]["precision"] == "32-true"


def test_each_figure_is_on_the_page_once_and_the_head_maps_per_configuration(
    sweep: Path,
) -> None:
    html = (sweep / REPORT_FILE).read_text()
    captions = re.findall(r"<figcaption>(.*?)</figcaption>", html)
    assert len(captions) == len(set(captions))
    assert [c for c in captions if c.startswith("head maps of")] == [
        f"head maps of model.dropout={dropout} (mean over 2 runs)" for dropout in ("0.0", "0.1")
    ]
    assert "prune curves" in captions
    # The heatmap is the table chosen in a list alone, not an image beside it as well.
    assert not any("validation loss over" in c for c in captions)
    assert html.count('<div class="heatmap" data-key="best_val_loss"') == 1


def test_the_page_needs_nothing_but_itself(sweep: Path) -> None:
    html = (sweep / REPORT_FILE).read_text()
    assert not re.search(r"https?:", html)
    sources = [v for k, v in _Page(html).attributes if k in ("src", "href")]
    assert sources and all(
        v.startswith("data:image/svg+xml;base64,") or not re.match(r"[a-z]+:|//", v)
        for v in sources
    )
    assert "<link" not in html and "<iframe" not in html and html.count("<script") == 1


def _curve_sets(sweep: Path) -> dict[str | None, list[Path]]:
    """The run directories of each configuration's curve set (its key: the configuration's
    place in the results table)."""
    labels = [row["label"] for row in _Page((sweep / REPORT_FILE).read_text()).rows]
    dirs: dict[str, list[Path]] = {}
    for job in sorted(p for p in sweep.iterdir() if (p / "metrics.json").is_file()):
        dropout = read_record(job)["overrides"]["model.dropout"]
        dirs.setdefault(f"model.dropout={dropout}", []).append(job)
    return {str(labels.index(label)): jobs for label, jobs in dirs.items()}


def test_each_configuration_has_its_curves_and_every_link_a_file(sweep: Path) -> None:
    facts = page_facts(sweep / REPORT_FILE)
    assert dead_links(facts) == []
    sets = _curve_sets(sweep)
    assert sorted(sets) == ["0", "1"] and all(len(jobs) == 2 for jobs in sets.values())
    assert missing_points(facts, sets) == []
    curves = [f["title"] for f in facts["figures"] if f["set"] is not None]
    assert all(t.endswith("(mean over 2 runs; band: min to max)") for t in curves)
    assert all(t.startswith("model.dropout=") for t in curves)  # each names its configuration
    html = (sweep / REPORT_FILE).read_text()
    options = re.findall(
        r'<option value="(\d+)">(.*?)</option>', html.split('id="curves-choice"')[1]
    )
    assert [label for _, label in options] == [f"{row['label']} (n=2)" for row in _Page(html).rows]


def test_a_sweep_jobs_page_is_a_run_page(sweep: Path) -> None:
    """Its changed settings first, every setting folded, its files once they exist (the
    eval, pairs and head analysis of the fixture), no word of a sweep."""
    page = sweep / "0" / REPORT_FILE
    html = page.read_text()
    changed = html[html.index('<table id="overrides">') : html.index('<details id="settings">')]
    assert "<td>model.dropout</td><td>0.0</td>" in changed and "<td>seed</td><td>1</td>" in changed
    assert "<td>model.norm</td>" not in changed  # a default: with the rest, folded
    assert "<td>model.norm</td><td>pre</td>" in html.split('<details id="settings">')[1]
    facts = page_facts(page)
    assert dead_links(facts) == []
    linked = {Path(link).relative_to(page.parent).as_posix() for link in facts["links"]}
    assert {"checkpoints/eval.jsonl", "checkpoints/heads.json", "curves.jsonl"} <= linked
    assert missing_points(facts, {"0": [sweep / "0"]}) == []
    for word in SWEEP_WORDS:
        assert word not in html, word


@pytest.fixture(scope="module")
def planted(sweep: Path, tmp_path_factory) -> list[Path]:
    """The sweep's page with a failed job whose error and swept value are planted markup,
    and the fine-tune's page (its task's class name is)."""
    copy = _copy(sweep, tmp_path_factory.mktemp("planted") / "sweep")
    overrides = {**read_record(sweep / "0")["overrides"], "model.dropout": PLANTED["swept"]}
    failed = {"status": "failed", "error": PLANTED["error"], "overrides": overrides}
    write_record(copy / "4", failed)
    write_report(copy)
    return [copy / REPORT_FILE, sweep.parent / "ft" / REPORT_FILE]


def test_text_from_runs_is_escaped(planted: list[Path]) -> None:
    sweep_page, finetune_page = (path.read_text() for path in planted)
    for text, page in (
        (PLANTED["error"], sweep_page),
        (PLANTED["swept"], sweep_page),
        (PLANTED["class"], finetune_page),
    ):
        assert text not in page
        escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert escaped.replace('"', "&#34;").replace("'", "&#39;") in page


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
def test_a_browser_opens_sorts_and_draws_the_page(planted: list[Path], tmp_path: Path) -> None:
    browser = Browser(tmp_path / "profile")
    try:
        browser.open(planted[1])
        assert browser.evaluate("window.pwned === undefined")
        assert PLANTED["class"] in browser.evaluate("document.body.innerText")
        browser.open(planted[0])
        assert browser.evaluate("window.pwned === undefined")
        text = browser.evaluate("document.body.innerText")
        assert PLANTED["error"] in text and PLANTED["swept"] in text
        order = "Array.from(document.querySelectorAll('#results tbody tr'), r => r.dataset.label)"
        before = browser.evaluate(order)
        assert len(before) == 3  # the two dropouts and the planted failed one
        sorted_by = []
        for _ in range(2):  # ascending, then descending: one of them moves the rows
            browser.evaluate(
                "document.querySelector('#results th[data-key=best_val_loss]').click()"
            )
            sorted_by.append(browser.evaluate(order))
        assert sorted_by[0] != sorted_by[1] and sorted(sorted_by[0]) == sorted(before)
        means = (
            "Array.from(document.querySelectorAll('#results tbody tr'), r => "
            "r.querySelector('td[data-mean]')?.dataset.mean)"
        )
        shown = [float(m) for m in browser.evaluate(means) if m is not None]
        assert shown == sorted(shown, reverse=True)  # descending by the clicked column
        image = matplotlib.image.imread(__import__("io").BytesIO(browser.screenshot()))
        assert image.shape[0] > 500 and float(image[..., :3].std()) > 0.05  # not blank
        assert browser.errors == []
    finally:
        browser.close()


@pytest.mark.skipif(CHROMIUM is None, reason="needs chromium (apt-get install chromium)")
def test_a_browser_shows_each_configurations_curves_and_follows_every_link(
    sweep: Path, tmp_path: Path
) -> None:
    browser = Browser(tmp_path / "profile")
    hidden = "Array.from(document.querySelectorAll('div.curve-set'), d => d.hidden)"
    try:
        facts = browser_facts(browser, sweep / REPORT_FILE)
        assert dead_links(facts) == []
        assert missing_points(facts, _curve_sets(sweep)) == []
        assert browser.evaluate(hidden) == [False, True]
        browser.evaluate(
            "(c => { c.value = '1'; c.dispatchEvent(new Event('change')); })"
            "(document.getElementById('curves-choice'))"
        )
        assert browser.evaluate(hidden) == [True, False]  # the other configuration's set
        job = browser_facts(browser, sweep / "0" / REPORT_FILE)
        assert dead_links(job) == []
        assert missing_points(job, {"0": [sweep / "0"]}) == []
        assert not [word for word in SWEEP_WORDS if word in job["text"]]
        assert browser.errors == []
    finally:
        browser.close()


def test_mode_report_rebuilds_a_page_and_names_a_bad_target(sweep: Path, tmp_path: Path) -> None:
    target = tmp_path / "run"
    shutil.copytree(sweep / "1", target)
    (target / REPORT_FILE).unlink()
    result = run(compose_config("mode=report", f"ckpt_path={target}", "output_dir=unused"))
    assert result["report"] == str(target / REPORT_FILE) and (target / REPORT_FILE).is_file()
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="holds no run"):
        run(compose_config("mode=report", f"ckpt_path={tmp_path / 'empty'}", "output_dir=unused"))


def test_the_heatmap_is_one_object_the_summary_draws_and_the_page_shows(tmp_path: Path) -> None:
    """Heads 1 is worse than heads 2 beyond two standard errors; both of heads 4 failed."""
    runs = [("1", 2.30), ("1", 2.32), ("2", 2.00), ("2", 2.02), ("4", None), ("4", None)]
    for job, (heads, loss) in enumerate(runs):
        overrides = {"model.num_heads": heads, "seed": str(job % 2 + 1)}
        record = {"status": "completed", "best_val_loss": loss} if loss else {"status": "failed"}
        write_record(tmp_path / str(job), {**record, "overrides": overrides})
    report = build_report(tmp_path)
    (heatmap,) = heatmaps(report, column_groups(report))
    assert (heatmap.key, heatmap.row_values, heatmap.col_values) == (
        "best_val_loss",
        ["1", "2", "4"],
        [""],
    )
    cells = [row[0] for row in heatmap.cells]
    assert [cell.text for cell in cells] == ["2.3100 ± 0.0141*", "2.0100 ± 0.0141", "failed"]
    assert cells[1].goodness == 1.0 and cells[0].goodness == 0.0 and cells[2].failed == 2
    assert "heatmap_val_loss.png" in {path.name for path in write_summary_files(report)}
    html = write_page(report).read_text()
    (table,) = re.findall(r'<div class="heatmap".*?</div>', html, re.DOTALL)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", table)
    assert cells == ["2.3100 ± 0.0141*", "2.0100 ± 0.0141", "2 failed"]
    assert "<img" not in html  # no figure but the heatmap: no curves were recorded
