"""The docs test's fork server: ``python tests/docs_server.py JOBS.json RESULTS.json``.

It imports tinylm once, then forks a fresh child per job, which runs ``train.py`` (or ``-m
MODULE``) as ``__main__`` with the job's argv, environment and working directory, as the shell
would; the child's exit code is the command's. A child leaves through ``os._exit`` (a joblib
sweep hung in loky's exit handler inside a forked child), and its process group is killed
afterwards, which ends what it left running (launcher workers). RESULTS.json is rewritten
after each job, so a server that dies still reports the jobs it ran.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import signal
import sys
import time
import traceback
from typing import Any

# What every child would otherwise import again.
PRELOADED = (
    "train",
    "modes.train",
    "modes.eval",
    "modes.generate",
    "modes.attention",
    "modes.export",
    "modes.sweep",
    "analysis.summary",
)


def run_child(job: dict[str, Any]) -> int:
    """In the forked child: the job as the shell would run it; its exit code."""
    os.setpgrp()
    log = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.chdir(job["cwd"])
    os.environ.update(job["env"])
    argv = job["argv"]
    try:
        if argv[0] == "-m":
            sys.argv = ["python", *argv[2:]]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = list(argv)
            runpy.run_path(argv[0], run_name="__main__")
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    """Fork, wait up to the job's timeout, kill what is left; the exit code and seconds."""
    started = time.time()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = run_child(job)
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    deadline = started + job["timeout"]
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            rc: int | str = os.waitstatus_to_exitcode(status)
            break
        if time.time() > deadline:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            rc = "timeout"
            break
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # what it left running (launcher workers)
    return {"rc": rc, "seconds": round(time.time() - started, 1)}


def main(spec_path: str, results_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    sys.path.insert(0, spec["root"])
    for module in PRELOADED:
        importlib.import_module(module)
    results = []
    for job in spec["jobs"]:
        results.append(run_job(job))
        with open(results_path, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main(*sys.argv[1:3])
