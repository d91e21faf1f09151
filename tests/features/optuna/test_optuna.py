"""Optuna searches (``hydra/sweeper=optuna``): a stored study that a search killed with SIGKILL
resumes, two workers share, a pruner prunes and several objectives make a Pareto front of;
a failed trial is recorded and the search goes on; bad settings are answered in one line before
any trial. The searches run as real processes forked from one that imported tinylm once
(``tests/features/optuna/train_forks.py``), a few steps a trial."""

from __future__ import annotations

import csv
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from analysis.run_record import write_record
from analysis.sweep_summary import write_sweep_summary
from conf.command_line import check_command_line
from features.optuna.trial import OPTUNA_SEARCH
from tests.conftest import TINY

optuna = pytest.importorskip("optuna")
from features.optuna import study as studies  # noqa: E402
from tests.features.optuna import train_forks  # noqa: E402  (after the skip: its server imports Optuna)

# A few steps a trial: the search's machinery is under test, not the loss it finds. Without
# TINY's learning rate, which the searches search.
SEARCH = [
    "-m",
    *(a for a in TINY if not a.startswith("optim.lr=")),
    "trainer.max_steps=4",
    "trainer.val_check_interval=2",
    "trainer.limit_val_batches=1",
    "hydra/sweeper=optuna",
    "hydra.sweeper.n_jobs=1",
    # A killed process's trial is found stale 2 s after its last heartbeat.
    "hydra.sweeper.heartbeat_interval=1",
    "hydra.sweeper.grace_period=2",
]
LR, DROPOUT = (1e-4, 1e-2), (0.0, 0.3)
LR_AND_DROPOUT = [
    f"optim.lr=tag(log,interval({LR[0]},{LR[1]}))",
    f"model.dropout=interval({DROPOUT[0]},{DROPOUT[1]})",
]


def _search(tmp_path: Path, *args: str, name: str = "search") -> tuple[int, str]:
    """``train.py`` with ``args`` run to its end in a forked process: exit code, output."""
    log = tmp_path / f"{name}.log"
    code = train_forks.finish(train_forks.start(*args, cwd=tmp_path, log=log))
    return code, log.read_text()


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path) as f:
        return list(csv.DictReader(f))


def _study(sweep: Path) -> optuna.Study:
    return optuna.load_study(study_name=str(sweep.resolve()), storage=f"sqlite:///{sweep}/study.db")


def _error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("tinylm: error:")]


def _wait_for(condition, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


# --------------------------------------------------------------------------- searches


@pytest.mark.slow
def test_a_search_killed_mid_trial_resumes_to_n_trials_from_its_study(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    args = [
        *SEARCH,
        "trainer.max_steps=8",  # a trial long enough to be killed in its middle
        "hydra.sweeper.n_trials=3",
        "hydra.sweeper.sampler.seed=0",
        *LR_AND_DROPOUT,
        f"hydra.sweep.dir={sweep}",
    ]
    worker = train_forks.start(*args, cwd=tmp_path, log=tmp_path / "killed.log")
    started = sweep / "1" / "metrics.json"  # trial 1's job has started: "running"
    _wait_for(lambda: started.is_file() or not worker.is_alive())
    os.kill(worker.pid, signal.SIGKILL)
    assert train_forks.finish(worker) == -signal.SIGKILL
    killed = {t.number: t.state.name for t in _study(sweep).trials}
    assert killed == {0: "COMPLETE", 1: "RUNNING"}

    code, output = _search(tmp_path, *args, name="resumed")
    assert code == 0, output[-3000:]
    assert "1 of 3 trials finished" in output
    assert "trial 1 was left RUNNING by a process that stopped" in output
    trials = _study(sweep).trials
    states = [t.state.name for t in trials]
    assert states.count("COMPLETE") == 3 and states[1] == "FAIL"
    assert "error" not in trials[1].user_attrs  # not the job's failure: its process died
    # Its configuration is tried again: the retry is the trial asked right after it failed.
    (retry,) = (t for t in trials if t.system_attrs.get("failed_trial") == 1)
    assert retry.params == trials[1].params and retry.state.name == "COMPLETE"
    # The re-run drew new configurations (its seeded sampler did not start over).
    drawn = [tuple(t.params.values()) for t in trials if t.number != retry.number]
    assert len(set(drawn)) == len(drawn)
    runs = {r["run"]: r for r in _rows(sweep / "runs.csv")}
    assert runs["1"]["status"] == "failed" and "its process stopped" in runs["1"]["error"]
    for trial in trials:  # each trial's run holds its values
        record = json.loads((sweep / str(trial.number) / "metrics.json").read_text())
        assert float(record["overrides"]["optim.lr"]) == pytest.approx(trial.params["optim.lr"])
    report = json.loads((sweep / "search.json").read_text())
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    best = min(complete, key=lambda t: t.value)
    assert report["best"] == [best.number]
    assert f"Optuna's best trial: run {best.number} (" in (sweep / "summary.md").read_text()
    result = OmegaConf.load(sweep / "optimization_results.yaml")
    assert result.best_value == pytest.approx(best.value)

    # Once more: the study has its 3 trials, and nothing runs.
    code, output = _search(tmp_path, *args, name="again")
    assert code == 0, output[-3000:]
    assert "3 of 3 trials finished" in output and "Launching" not in output
    assert len(_study(sweep).trials) == len(trials)


@pytest.mark.slow
def test_two_workers_share_a_two_objective_search_and_report_its_front(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    args = [
        *(a for a in SEARCH if not a.startswith(("model.hidden_size=", "model.num_heads="))),
        "model.num_heads=1",
        "hydra.sweeper.n_trials=6",
        "hydra/sweeper/sampler=random",
        "hydra.sweeper.directions=[minimize,minimize]",
        "hydra.sweeper.objectives=[best_val_loss,params]",
        "optim.lr=tag(log,interval(1e-4,1e-2))",
        "model.hidden_size=choice(16,32,48)",
        f"hydra.sweep.dir={sweep}",
    ]
    workers = [
        train_forks.start(*args, cwd=tmp_path, log=tmp_path / f"worker{i}.log") for i in (0, 1)
    ]
    codes = [train_forks.finish(w) for w in workers]
    logs = [(tmp_path / f"worker{i}.log").read_text() for i in (0, 1)]
    assert codes == [0, 0], logs[0][-2000:] + logs[1][-2000:]
    everything = _study(sweep).trials
    # Two workers that count at the same moment may each ask the last trial: the one past
    # n_trials is failed as surplus before it runs (test_workers_asking_at_once_...).
    trials = [t for t in everything if studies.SURPLUS not in t.user_attrs]
    assert sorted(t.number for t in trials) == list(range(6))
    assert all(t.state.name == "COMPLETE" for t in trials)
    assert all(t.state.name == "FAIL" for t in everything if t not in trials)
    # Each trial ran in its own directory, in one worker: no run dir is named twice, and
    # each holds its trial's values.
    started = [line for log in logs for line in log.splitlines() if ", run dir " in line]
    run_dirs = [line.rsplit("run dir ", 1)[1] for line in started]
    assert sorted(run_dirs) == sorted(str(sweep / str(n)) for n in range(6))
    assert all(logs), "each worker ran trials"
    assert all("run dir" in log for log in logs)
    for trial in trials:
        record = json.loads((sweep / str(trial.number) / "metrics.json").read_text())
        assert record["overrides"]["model.hidden_size"] == str(trial.params["model.hidden_size"])
        assert trial.values == [record["best_val_loss"], record["params"]]
    # The front: the trials no other trial beats on both objectives, found independently.
    front = [
        t.number
        for t in trials
        if not any(
            all(o <= v for o, v in zip(other.values, t.values, strict=True))
            and other.values != t.values
            for other in trials
        )
    ]
    report = json.loads((sweep / "search.json").read_text())
    assert report["best"] == sorted(front)
    assert set(report["importances"]) == {"best_val_loss", "params"}


def test_workers_asking_at_once_beyond_n_trials_agree_which_trial_is_surplus() -> None:
    import optuna

    from features.optuna.study import beyond_n_trials

    study = optuna.create_study()
    first = [study.ask() for _ in range(5)]
    study.tell(first[0], 1.0)
    study.tell(first[1], state=optuna.trial.TrialState.FAIL)  # killed: does not count
    assert beyond_n_trials(study, 5) == set()
    late = [study.ask() for _ in range(2)]  # two workers saw 4 counted and each asked 1
    assert [t.number for t in late] == [5, 6]
    assert beyond_n_trials(study, 5) == {6}  # the later number, in every worker
    study.tell(first[2], 2.0)
    assert beyond_n_trials(study, 5) == {6}  # finishing does not change which
    assert beyond_n_trials(study, 7) == set()


@pytest.mark.slow
def test_a_pruner_stops_a_trial_whose_losses_are_bad_and_the_search_goes_on(
    tmp_path: Path,
) -> None:
    sweep = tmp_path / "sweep"
    # Five finished trials planted in the study with a loss of 1.0 at every validation: the
    # tiny model's real losses (~5.7) are far worse than their median, so the median pruner
    # stops each new trial at its first validation.
    sweep.mkdir()
    space = {"optim.lr": "interval(1e-4,1e-2)"}
    planted = studies.open_study(
        studies.open_storage(f"sqlite:///{sweep}/study.db"),
        str(sweep.resolve()),
        studies.Search(space, ["best_val_loss"], ["minimize"]),
    )
    distribution = optuna.distributions.FloatDistribution(*LR)
    for number in range(5):
        planted.add_trial(
            optuna.trial.create_trial(
                params={"optim.lr": 1e-3},
                distributions={"optim.lr": distribution},
                value=1.0,
                intermediate_values={2: 1.0, 4: 1.0, 6: 1.0, 8: 1.0},
                user_attrs={"run": f"planted {number}"},
            )
        )
    code, output = _search(
        tmp_path,
        *SEARCH,
        "trainer.max_steps=8",
        "hydra.sweeper.n_trials=7",
        "hydra.sweeper.pruner=median",
        "optim.lr=interval(1e-4,1e-2)",
        f"hydra.sweep.dir={sweep}",
    )
    assert code == 0, output[-3000:]
    trials = _study(sweep).trials
    assert [t.state.name for t in trials[5:]] == ["PRUNED", "PRUNED"]  # both new ones ran
    for trial in trials[5:]:
        run = sweep / str(trial.number)
        record = json.loads((run / "metrics.json").read_text())
        assert record["status"] == "pruned" and record["step"] == 2  # its first validation
        assert record["consumed"]["steps"] == 2 and trial.user_attrs["consumed"]["steps"] == 2
        assert list(trial.intermediate_values) == [2]
        assert (run / "checkpoints" / "last.ckpt").is_file()
    runs = _rows(sweep / "runs.csv")
    assert [r["status"] for r in runs] == ["pruned", "pruned"]


def test_a_failed_trial_is_recorded_and_the_search_goes_on(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    # TINY's width 32 takes 2 heads, not 3: a trial of 3 fails at its configuration check.
    # The search space comes from a config file.
    preset = tmp_path / "conf" / "experiment" / "heads.yaml"
    preset.parent.mkdir(parents=True)
    preset.write_text(
        "# @package _global_\nhydra:\n  sweeper:\n    params:\n      model.num_heads: choice(2,3)\n"
    )
    code, output = _search(
        tmp_path,
        "--config-dir",
        str(tmp_path / "conf"),
        *(a for a in SEARCH if not a.startswith("model.num_heads=")),
        "experiment=heads",
        "hydra/sweeper/sampler=random",
        "hydra.sweeper.sampler.seed=1",
        "hydra.sweeper.n_trials=3",
        "logger=tensorboard",
        f"hydra.sweep.dir={sweep}",
    )
    assert code == 0, output[-3000:]
    runs = _rows(sweep / "runs.csv")
    heads = [r["model.num_heads"] for r in runs]
    assert sorted(set(heads)) == ["2", "3"], "the seeded draws this test relies on changed"
    assert [r["status"] for r in runs] == ["completed" if h == "2" else "failed" for h in heads]
    errors = [r["error"] for r in runs if r["status"] == "failed"]
    assert all("not divisible by num_heads=3" in error for error in errors)
    trials = _study(sweep).trials
    assert [t.state.name for t in trials] == ["COMPLETE" if h == "2" else "FAIL" for h in heads]
    result = OmegaConf.load(sweep / "optimization_results.yaml")
    assert result.best_params == {"model.num_heads": 2}
    # The run is named by the searched key alone, as a swept key names the runs of a sweep.
    run = heads.index("2")
    (run_dir,) = (sweep / str(run) / "tensorboard").iterdir()
    assert run_dir.name == "model.num_heads=2"


def test_a_search_whose_every_trial_failed_ends_in_one_line_with_its_summary(
    tmp_path: Path,
) -> None:
    sweep = tmp_path / "sweep"
    code, output = _search(
        tmp_path,
        *SEARCH,
        "model.num_heads=3",  # every trial fails at its configuration check: no training
        "hydra.sweeper.n_trials=2",
        "optim.lr=interval(1e-4,1e-2)",
        f"hydra.sweep.dir={sweep}",
    )
    assert code == 1
    (line,) = _error_lines(output)
    assert "all 2 trials of the Optuna search failed" in line
    assert str(sweep / "summary.md") in line
    runs = _rows(sweep / "runs.csv")
    assert [r["status"] for r in runs] == ["failed", "failed"]
    assert "Optuna's best trial" not in (sweep / "summary.md").read_text()
    assert not (sweep / "optimization_results.yaml").exists()


def test_optuna_dashboard_serves_the_study(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    planted = optuna.create_study(storage=storage, study_name="dashboard-test")
    for loss in (3.0, 2.5):
        planted.add_trial(optuna.trial.create_trial(params={}, distributions={}, value=loss))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    dashboard = Path(sys.executable).with_name("optuna-dashboard")
    server = subprocess.Popen(
        [str(dashboard), storage, "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        api = f"http://127.0.0.1:{port}/api"

        def get(path: str) -> dict:
            with urllib.request.urlopen(f"{api}/{path}", timeout=5) as response:
                return json.loads(response.read())

        def serving() -> bool:
            try:
                return bool(get("studies"))
            except OSError:
                return server.poll() is not None  # ended: the assertions below say so

        _wait_for(serving, timeout=60)
        (listed,) = get("studies")["study_summaries"]
        assert listed["study_name"] == "dashboard-test"
        detail = get(f"studies/{listed['study_id']}")
        assert [t["values"] for t in detail["trials"]] == [[3.0], [2.5]]
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert server.returncode is not None


# --------------------------------------------------------------------------- bad settings


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "optim.lrr=interval(1e-4,1e-2)",
            "unknown key(s) optim.lrr (did you mean optim.lr?)",
        ),
        (
            "hydra.sweeper.params.optim.lrr=interval(1e-4,1e-2)",
            "unknown key(s) hydra.sweeper.params.optim.lrr (did you mean "
            "hydra.sweeper.params.optim.lr?)",
        ),
        (
            "hydra.sweeper.params.modle.dropout=interval(0,0.3)",
            "hydra.sweeper.params.modle (did you mean hydra.sweeper.params.model?)",
        ),
        (
            # A known key: Hydra cannot set it from the command line (quoted or not).
            "hydra.sweeper.params.optim.lr='interval(1e-4,1e-2)'",
            "give the search space as optim.lr=interval(1e-4,1e-2)",
        ),
        ("hydra.sweeper.params.model=choice(gtp,bert)", "did you mean model=gpt?"),
        ("hydra/sweeper/sampler=rndom", "did you mean hydra/sweeper/sampler=random?"),
    ],
)
def test_a_search_space_is_checked_on_the_command_line(override: str, message: str) -> None:
    with pytest.raises(ValueError) as raised:
        check_command_line(["-m", "hydra/sweeper=optuna", override])
    assert message in str(raised.value)


def test_a_known_search_space_passes_the_command_line_check() -> None:
    check_command_line(["-m", "hydra/sweeper=optuna", *LR_AND_DROPOUT, "model=choice(gpt,bert)"])


def test_an_objective_the_jobs_do_not_record_is_named_with_what_they_record() -> None:
    metrics = {"best_val_loss": 2.5, "params": 1000, "consumed": {"steps": 4, "seconds": 1.5}}
    assert studies.objective_values(metrics, ["params", "seconds"]) == [1000.0, 1.5]
    with pytest.raises(ValueError) as raised:
        studies.objective_values(metrics, ["best_val_los"])
    message = str(raised.value)
    assert "best_val_los is not recorded by this search's jobs (did you mean best_val_loss?)" in (
        message
    )
    assert "best_val_loss, params, seconds, steps" in message


def test_a_target_the_job_did_not_reach_is_the_worst_time_and_an_unset_one_is_refused() -> None:
    reached = {"seconds_to_target": 12.5, "steps_to_target": 150}
    assert studies.objective_values(reached, ["seconds_to_target", "steps_to_target"]) == [
        12.5,
        150.0,
    ]
    missed = {"best_val_loss": 2.5, "seconds_to_target": None, "steps_to_target": None}
    assert studies.objective_values(missed, ["seconds_to_target"]) == [float("inf")]
    with pytest.raises(ValueError, match="seconds_to_target is not recorded"):
        studies.objective_values({"best_val_loss": 2.5}, ["seconds_to_target"])  # no target


def _study_of_another_search(tmp_path: Path) -> list[str]:
    """A study named "other" in tmp_path/other.db, made for a search of the dropout."""
    url = f"sqlite:///{tmp_path / 'other.db'}"
    search = studies.Search({"model.dropout": "interval(0,0.3)"}, ["best_val_loss"], ["minimize"])
    studies.open_study(studies.open_storage(url), "other", search)
    return [f"hydra.sweeper.storage={url}", "hydra.sweeper.study_name=other"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["hydra.sweeper.direction=maximize"], "best_val_loss is a loss to minimise"),
        (
            ["hydra.sweeper.objectives=[seconds_to_target]", "hydra.sweeper.direction=maximize"],
            "seconds_to_target is a time to a target to minimise",
        ),
        (
            ["hydra.sweeper.storage=sqlite:////no/such/directory/study.db"],
            "hydra.sweeper.storage=sqlite:////no/such/directory/study.db cannot be opened",
        ),
        (
            ["hydra.sweeper.storage=postgresq://host/db"],
            "hydra.sweeper.storage=postgresq://host/db cannot be opened",
        ),
        (["hydra.sweeper.pruner=medain"], "pruner=medain is unknown (did you mean median?)"),
        (
            ["hydra.sweeper.sampler.name=rando"],
            "sampler.name=rando is unknown (did you mean random?)",
        ),
        (
            ["hydra.sweeper.directions=[minimize,minimize]"],
            "hydra.sweeper.objectives=['best_val_loss'] and hydra.sweeper.directions="
            "['minimize', 'minimize'] differ in length",
        ),
        (
            [
                "hydra.sweeper.objectives=[best_val_loss,params]",
                "hydra.sweeper.directions=[minimize,minimize]",
                "hydra.sweeper.pruner=median",
            ],
            "hydra.sweeper.pruner=median prunes a search of one objective",
        ),
        (
            ["experiment=search"],
            "hydra.sweeper.params: unknown key(s) optim.lrr (did you mean optim.lr?)",
        ),
        (
            ["hydra.sweeper.objectives=[best_val_losss]"],
            "hydra.sweeper.objectives: best_val_losss is not a number that a job records (did "
            "you mean best_val_loss?); give some of: seed, step, best_val_loss, ",
        ),
        (
            ["hydra.sweeper.n_trials=0"],
            "hydra.sweeper.n_trials=0: give the number of trials the search finishes, a whole "
            "number from 1",
        ),
        (
            ["OTHER_STUDY"],
            "the study 'other' in this storage was made for another search (space="
            "{'model.dropout': 'interval(0,0.3)'}), and this command asks for space="
            "{'optim.lr': 'interval(1e-4,1e-2)'}",
        ),
    ],
)
def test_bad_search_settings_give_one_line_before_any_trial(
    tmp_path: Path, overrides: list[str], message: str
) -> None:
    preset = tmp_path / "conf" / "experiment" / "search.yaml"
    preset.parent.mkdir(parents=True)
    preset.write_text(
        "# @package _global_\nhydra:\n  sweeper:\n    params:\n"
        "      optim.lrr: interval(1e-4,1e-2)\n"
    )
    if overrides == ["OTHER_STUDY"]:
        overrides = _study_of_another_search(tmp_path)
    code, output = _search(
        tmp_path,
        "--config-dir",
        str(tmp_path / "conf"),
        *SEARCH,
        *overrides,
        "optim.lr=interval(1e-4,1e-2)",
        f"hydra.sweep.dir={tmp_path / 's'}",
    )
    assert code == 1
    assert "Traceback" not in output
    (line,) = _error_lines(output)
    assert message in line, output[-2000:]
    assert not (tmp_path / "s" / "0").exists()  # no trial started


def test_the_summary_of_a_search_names_its_best_trial_and_draws_no_heatmap(
    tmp_path: Path,
) -> None:
    for job, (lr, loss) in enumerate([("0.001", 2.5), ("0.003", 2.25), ("0.002", 2.75)]):
        overrides = {"optim.lr": lr, "logger": "none"}
        record = {"status": "completed", "best_val_loss": loss, "overrides": overrides}
        write_record(tmp_path / str(job), record)
    OmegaConf.save({"hydra": {"sweeper": {"_target_": OPTUNA_SEARCH}}}, tmp_path / "multirun.yaml")
    results = {"name": "optuna", "best_params": {"optim.lr": 0.003}, "best_value": 2.25}
    OmegaConf.save(results, tmp_path / "optimization_results.yaml")
    written = {p.name for p in write_sweep_summary(tmp_path)}
    # No heatmap, no curves logged; the history drawn from the runs (there is no search.json).
    assert written == {"summary.md", "summary.csv", "runs.csv", "optuna_history.png"}
    summary = (tmp_path / "summary.md").read_text()
    assert "Optuna's best trial: run 1 (optim.lr=0.003), best_val_loss 2.25" in summary
    assert "add seeds" not in summary  # a trial is one run: seeds would be searched, not replicates
    # The same sweep by the basic sweeper: a heatmap, no best trial.
    OmegaConf.save({"hydra": {"sweeper": {"_target_": "BasicSweeper"}}}, tmp_path / "multirun.yaml")
    assert "heatmap_val_loss.png" in {p.name for p in write_sweep_summary(tmp_path)}
    assert "Optuna's best trial" not in (tmp_path / "summary.md").read_text()


def test_the_summary_of_a_stored_search_has_its_section_and_history(tmp_path: Path) -> None:
    trials = []
    for number, (state, loss, steps) in enumerate(
        [("COMPLETE", 2.5, 150), ("PRUNED", None, 25), ("COMPLETE", 2.25, 150), ("FAIL", None, 0)]
    ):
        status = {"COMPLETE": "completed", "PRUNED": "pruned", "FAIL": "failed"}[state]
        overrides = {"optim.lr": str(0.001 * (number + 1))}
        record = {"status": status, "best_val_loss": loss or 3.0, "overrides": overrides}
        write_record(tmp_path / str(number), record)
        trials.append(
            {
                "number": number,
                "state": state,
                "params": {"optim.lr": 0.001 * (number + 1)},
                "values": [loss] if loss else None,
                "run": str(number),
                "consumed": {"steps": steps},
                "error": "boom" if state == "FAIL" else None,
                "last_reported": 3.0 if state == "PRUNED" else None,
            }
        )
    report = {
        "study_name": "s",
        "storage": "sqlite:///study.db",
        "objectives": ["best_val_loss"],
        "directions": ["minimize"],
        "trials": trials,
        "best": [2],
        "importances": {"best_val_loss": "2 completed trial(s): importances need at least 3"},
    }
    (tmp_path / "search.json").write_text(json.dumps(report))
    OmegaConf.save({"hydra": {"sweeper": {"_target_": OPTUNA_SEARCH}}}, tmp_path / "multirun.yaml")
    written = {p.name for p in write_sweep_summary(tmp_path)}
    assert "optuna_history.png" in written and "heatmap_val_loss.png" not in written
    summary = (tmp_path / "summary.md").read_text()
    assert (
        "Optuna's best trial: run 2 (optim.lr=0.003), best_val_loss 2.25 (search.json)" in summary
    )
    assert "4 trials, 2 completed, 1 pruned, 1 failed." in summary
    assert "Training steps: 325 in all, 25 of them in pruned trials" in summary
    assert "(no importances for best_val_loss: 2 completed trial(s)" in summary
    statuses = {r["run"]: r["status"] for r in _rows(tmp_path / "runs.csv")}
    assert statuses == {"0": "completed", "1": "pruned", "2": "completed", "3": "failed"}
