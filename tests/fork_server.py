"""The tests' fork server: ``python tests/fork_server.py JOBS.json RESULTS.json`` runs a batch
(the docs test's commands); ``python tests/fork_server.py --serve`` reads one job a line (JSON)
on stdin and answers each with one line of JSON on stdout (``tests.conftest.train_py``).

It imports tinylm and trains a tiny model once (``tests/fork_server_warmup.py``), then forks
a fresh child per job, which runs ``train.py`` (or ``-m MODULE``) as ``__main__`` with the
job's argv, environment and working directory, as the shell would; the child's exit code is
the command's. A job's output goes to its ``log`` file, or to its ``stdout`` and ``stderr``
files. A child leaves through ``os._exit`` (a joblib sweep hung in loky's exit handler inside
a forked child), and its process group is killed afterwards, which ends what it left running
(launcher workers). RESULTS.json is rewritten after each job, so a server that dies still
reports the jobs it ran.
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
    "modes.export",
    "modes.sweep",
    "analysis.summary",
)


def run_child(job: dict[str, Any]) -> int:
    """In the forked child: the job as the shell would run it; its exit code."""
    os.setpgrp()
    for fd, name in ((1, "stdout"), (2, "stderr")):
        out = os.open(
            job.get(name, job.get("log")),
            os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND,
            0o644,
        )
        os.dup2(out, fd)
    os.chdir(job["cwd"])
    if job.get("whole_env"):  # the job's environment is all of it, as a subprocess's would be
        os.environ.clear()
    os.environ.update(job["env"])
    threads_as_a_fresh_process()
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


def preload(root: str) -> None:
    """tinylm imported, then one tiny training run (``tests/fork_server_warmup.py``): a child
    forked from a cold server paid ~0.9 s of the 2.1 s of a tiny run for a process's first
    run (the kernels' first calls, Python's type caches)."""
    # Run as a script, this file's folder came first on the path, where tests/features/ would
    # shadow the checkout's features/.
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [root, *(p for p in sys.path if os.path.abspath(p or ".") != here)]
    for module in PRELOADED:
        importlib.import_module(module)
    importlib.import_module("tests.fork_server_warmup")


def threads_as_a_fresh_process() -> None:
    """The warm-up left torch on one thread (so that no OpenMP pool is copied into a fork); a
    fresh interpreter would take OMP_NUM_THREADS, or every core it may use."""
    import torch

    threads = os.environ.get("OMP_NUM_THREADS") or len(os.sched_getaffinity(0))
    torch.set_num_threads(int(threads))


def serve() -> None:
    """Jobs from stdin, one JSON line each, answered in order on stdout."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything printed while importing must not mix with the answers
    preload(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for line in sys.stdin:
        answers.write(json.dumps(run_job(json.loads(line))) + "\n")
        answers.flush()


def main(spec_path: str, results_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    preload(spec["root"])
    results = []
    for job in spec["jobs"]:
        results.append(run_job(job))
        with open(results_path, "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        main(*sys.argv[1:3])
