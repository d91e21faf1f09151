"""An Optuna search's part of its sweep's report (``Feature.report``), read from the
``search.json`` the search wrote (``search.py``) or, without one, from its runs and
``optimization_results.yaml``: no Optuna needed. The summary names the best trial (or the Pareto
front), counts the trials by state with the training steps they consumed, lists each
parameter's importance for each objective, and draws the search's history.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import yaml
from matplotlib.ticker import MaxNLocator

from analysis.plots import save_figure
from analysis.records import format_value, markdown_table
from analysis.report import Figure, Report, sweep_settings
from analysis.run_record import Status
from features.optuna.checks import LOSSES

SEARCH_RECORD = "search.json"
RESULTS = "optimization_results.yaml"


def add_search(report: Report) -> None:
    """The search's sentences, section and history in the report of its sweep directory;
    nothing for another sweeper's."""
    sweeper = sweep_settings(report.root).get("hydra", {}).get("sweeper") or {}
    if report.single or "optuna" not in str(sweeper.get("_target_", "")).lower():
        return
    report.sampled = (
        "An Optuna search runs each trial once (the run's number is the trial's): no spread "
        "is known and differences are not judged."
    )
    path, results = report.root / SEARCH_RECORD, report.root / RESULTS
    record = json.loads(path.read_text()) if path.is_file() else None
    best = yaml.safe_load(results.read_text()) if results.is_file() else None
    if record:
        report.notes.append(best_sentence(record))
        report.sections.append(search_section(record))
    elif best:  # a search that wrote no search.json
        report.notes.append(_best_of_results(best, report.runs))
    history = partial(plot_search_history, record or _history_of_runs(report.runs))
    report.figures.append(Figure("search history", history, "optuna_history.png"))


def search_section(record: dict[str, Any]) -> str:
    """The summary's "Optuna search" section (Markdown)."""
    trials = record["trials"]
    states = [t["state"] for t in trials]
    killed = sum(s == "FAIL" and not t["error"] for s, t in zip(states, trials, strict=True))
    steps = {state: _steps(t for t in trials if t["state"] == state) for state in set(states)}
    counts = ", ".join(
        f"{states.count(state)} {word}"
        for state, word in (("COMPLETE", "completed"), ("PRUNED", "pruned"), ("FAIL", "failed"))
        if state in states
    )
    retried = f" ({killed} of them left running by a process that stopped, then retried)"
    objectives = zip(record["objectives"], record["directions"], strict=True)
    several = len(record["objectives"]) > 1
    best = [t for t in trials if t["number"] in record["best"]]
    paragraphs = [
        "## Optuna search",
        f"Study `{record['study_name']}` in `{record['storage']}`: {len(trials)} trials, "
        f"{counts}{retried if killed else ''}. Training steps: {sum(steps.values())} in all, "
        f"{steps.get('PRUNED', 0)} of them in pruned trials. Objectives: "
        + ", ".join(f"{o} ({d})" for o, d in objectives)
        + ".",
        "### " + ("Pareto front" if several else "Best trial"),
        "The trials no other trial beats on every objective."
        if several
        else "The completed trial with the best objective.",
        _trial_table(best, record["objectives"]).rstrip(),
        "### Parameter importances",
        "Optuna's get_param_importances (PED-ANOVA) over the completed trials: each "
        "parameter's share of the objective's variation, summing to 1 per objective.",
        _importance_table(record["importances"]).rstrip(),
    ]
    return "\n\n".join(paragraphs) + "\n"


def best_sentence(record: dict[str, Any]) -> str:
    """The search's best trial, or with several objectives its Pareto front."""
    best = [t for t in record["trials"] if t["number"] in record["best"]]
    if len(record["objectives"]) > 1:
        runs = ", ".join(str(t["run"]) for t in best)
        return f"Optuna's Pareto front: runs {runs} ({SEARCH_RECORD})."
    trial = best[0]  # of trials tied for the best value (Optuna lists them all), the first
    objective, value = record["objectives"][0], trial["values"][0]
    return _trial_sentence(f"run {trial['run']}", trial["params"], objective, value, SEARCH_RECORD)


def _best_of_results(results: dict[str, Any], runs: Sequence[dict[str, Any]]) -> str:
    """The best trial of ``optimization_results.yaml`` and the run with its settings and
    value."""
    params = results.get("best_params") or {}
    found = [
        run["run"]
        for run in runs
        if run.get("best_val_loss") == results.get("best_value")
        and all(str(run.get("overrides", {}).get(k)) == str(v) for k, v in params.items())
    ]
    run = f"run {found[0]}" if found else "a run no longer here"
    return _trial_sentence(run, params, "best_val_loss", results.get("best_value"), RESULTS)


def _trial_sentence(
    run: str, params: dict[str, Any], objective: str, value: Any, source: str
) -> str:
    settings = ", ".join(f"{k}={v}" for k, v in params.items())
    return f"Optuna's best trial: {run} ({settings}), {objective} {format_value(value)} ({source})."


def _steps(trials: Any) -> int:
    return sum(int((t.get("consumed") or {}).get("steps") or 0) for t in trials)


def _trial_table(trials: Sequence[dict[str, Any]], objectives: Sequence[str]) -> str:
    params = list(dict.fromkeys(k for t in trials for k in t["params"]))
    rows = [
        {
            "run": t["run"],
            **{k: format_value(t["params"].get(k)) for k in params},
            **{o: format_value(v) for o, v in zip(objectives, t["values"] or [], strict=False)},
        }
        for t in trials
    ]
    return markdown_table(["run", *params, *objectives], rows)


def _importance_table(importances: dict[str, Any]) -> str:
    """One row per parameter, one column per objective; an objective without importances
    says why."""
    known = {o: v for o, v in importances.items() if isinstance(v, dict)}
    missing = [f"{o}: {v}" for o, v in importances.items() if not isinstance(v, dict)]
    params = list(dict.fromkeys(p for values in known.values() for p in values))
    rows = [
        {"parameter": p, **{o: format_value(v.get(p)) for o, v in known.items()}} for p in params
    ]
    table = markdown_table(["parameter", *known], rows) if known else ""
    return table + "".join(f"\n(no importances for {line})\n" for line in missing)


def _history_of_runs(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A search's history as ``search.json`` holds it, from its runs alone."""
    states = {Status.COMPLETED: "COMPLETE", Status.PRUNED: "PRUNED"}
    trials = [
        {
            "number": int(run["run"]),
            "state": states.get(str(run.get("status")), "FAIL"),
            "values": [run.get("best_val_loss")],
            "last_reported": None,
        }
        for run in runs
        if str(run["run"]).isdigit()
    ]
    return {"objectives": ["best_val_loss"], "directions": ["minimize"], "trials": trials}


def best_so_far(values: Sequence[float | None], maximize: bool = False) -> list[float | None]:
    """The best value among each trial and those before it (None until the first value)."""
    best: list[float | None] = []
    for value in values:
        previous = best[-1] if best else None
        if value is None or previous is None:
            best.append(previous if value is None else value)
        else:
            best.append(max(previous, value) if maximize else min(previous, value))
    return best


def plot_search_history(record: dict[str, Any], out_path: Path) -> Path:
    """One panel per objective: each completed trial's value against its number, the best so
    far as a step line, the pruned trials at their last reported validation loss (on the
    axis where the objective is not a loss), the completed trials that never reached
    ``trainer.stop_at_loss`` (an infinite time) above the others and the failed ones as
    crosses on the axis."""
    # Ours, not optuna.visualization.matplotlib.plot_optimization_history: that takes a Study
    # (this reads search.json, or a running search's runs, without Optuna) and draws only the
    # COMPLETE trials (measured on a study of 2 complete, 1 pruned and 1 failed trial: 2
    # points and the best-value line), so the pruned and failed trials would be lost.
    objectives, directions = record["objectives"], record["directions"]
    fig, axes = plt.subplots(1, len(objectives), figsize=(6 * len(objectives), 4), squeeze=False)
    trials = sorted(record["trials"], key=lambda t: t["number"])
    numbers = [t["number"] for t in trials]
    for index, (ax, objective) in enumerate(zip(axes[0], objectives, strict=True)):
        values = [t["values"][index] if t["state"] == "COMPLETE" else None for t in trials]
        finite = [(n, v) for n, v in zip(numbers, values, strict=True) if v is not None]
        missed = [n for n, v in finite if not math.isfinite(v)]
        finite = [(n, v) for n, v in finite if math.isfinite(v)]
        shown = [v for _, v in finite]
        floor, ceiling = min(shown, default=0.0), max(shown, default=1.0)
        if finite:
            ax.plot(*zip(*finite, strict=True), "o", label="completed trial", color="tab:blue")
        if missed:
            label = "completed, target not reached (inf)"
            ax.plot(missed, [ceiling] * len(missed), "^", color="tab:purple", label=label)
        best = best_so_far(values, directions[index] == "maximize")
        ax.step(numbers, best, where="post", label="best so far", color="tab:orange")
        pruned = [t for t in trials if t["state"] == "PRUNED"]
        if pruned and objective in LOSSES:  # the validation losses it reported: its axis
            reported = [t for t in pruned if t["last_reported"] is not None]
            at = ([t["number"] for t in reported], [t["last_reported"] for t in reported])
            ax.plot(*at, "x", color="tab:gray", label="pruned (last reported)")
        elif pruned:
            at = ([t["number"] for t in pruned], [floor] * len(pruned))
            ax.plot(*at, "x", color="tab:gray", label="pruned (on the axis)")
        failed = [t["number"] for t in trials if t["state"] == "FAIL"]
        if failed:
            ax.plot(failed, [floor] * len(failed), "x", color="red", label="failed")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("trial")
        ax.set_ylabel(f"{objective} ({directions[index]})")
        ax.legend(fontsize=7)
    fig.suptitle("search history", fontsize=9)
    return save_figure(fig, out_path, dpi=120)
