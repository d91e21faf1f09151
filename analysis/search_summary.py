"""An Optuna search's part of its sweep summary, from the ``search.json`` the search wrote
(``features/optuna/study_report.py``): no Optuna needed to read it.

The section counts the trials by state with the training steps they consumed (pruned trials
apart), lists the best trial or, with several objectives, the Pareto front, and each
parameter's importance for each objective. ``analysis/plots.py`` draws the optimisation
history from the same record.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from analysis.records import format_value, markdown_table

SEARCH_RECORD = "search.json"


def read_search(sweep_dir: Path) -> dict[str, Any] | None:
    """The search's record in ``sweep_dir``; None when there is none (yet)."""
    path = sweep_dir / SEARCH_RECORD
    return json.loads(path.read_text()) if path.is_file() else None


def search_section(report: dict[str, Any]) -> str:
    """The summary's "Optuna search" section (Markdown)."""
    trials = report["trials"]
    states = [t["state"] for t in trials]
    killed = sum(s == "FAIL" and not t["error"] for s, t in zip(states, trials, strict=True))
    steps = {state: _steps(t for t in trials if t["state"] == state) for state in set(states)}
    counts = ", ".join(
        f"{states.count(state)} {word}"
        for state, word in (("COMPLETE", "completed"), ("PRUNED", "pruned"), ("FAIL", "failed"))
        if state in states
    )
    lines = [
        "## Optuna search",
        "",
        f"Study `{report['study_name']}` in `{report['storage']}`: {len(trials)} trials, "
        f"{counts}"
        + (
            f" ({killed} of them left running by a process that stopped, then retried)"
            if killed
            else ""
        )
        + f". Training steps: {sum(steps.values())} in all, {steps.get('PRUNED', 0)} of them "
        "in pruned trials. Objectives: "
        + ", ".join(
            f"{o} ({d})" for o, d in zip(report["objectives"], report["directions"], strict=True)
        )
        + ".",
        "",
    ]
    several = len(report["objectives"]) > 1
    best = [t for t in trials if t["number"] in report["best"]]
    lines += [
        "### " + ("Pareto front" if several else "Best trial"),
        "",
        (
            "The trials no other trial beats on every objective."
            if several
            else "The completed trial with the best objective."
        ),
        "",
        _trial_table(best, report["objectives"]).rstrip(),
        "",
        "### Parameter importances",
        "",
        "Optuna's get_param_importances (PED-ANOVA) over the completed trials: each "
        "parameter's share of the objective's variation, summing to 1 per objective.",
        "",
        _importance_table(report["importances"]).rstrip(),
        "",
    ]
    return "\n".join(lines)


def best_sentence(report: dict[str, Any]) -> str:
    """The summary's first paragraph's sentence on the search: its best trial, or with several
    objectives its Pareto front."""
    best = [t for t in report["trials"] if t["number"] in report["best"]]
    if len(report["objectives"]) > 1:
        runs = ", ".join(str(t["run"]) for t in best)
        return f"Optuna's Pareto front: runs {runs} ({SEARCH_RECORD})."
    (trial,) = best
    objective, value = report["objectives"][0], trial["values"][0]
    return trial_sentence(f"run {trial['run']}", trial["params"], objective, value, SEARCH_RECORD)


def trial_sentence(
    run: str, params: dict[str, Any], objective: str, value: Any, source: str
) -> str:
    """The sentence naming a search's best trial: its run, settings and value, and the file
    that says so."""
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
