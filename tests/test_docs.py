"""Every shell command in README.md and docs/*.md is run here, or listed with the reason why not.

**Convention.** Shell commands live in fenced blocks tagged ``bash`` (one command a line, ``\\``
continues it, ``#`` outside quotes starts a comment, leading ``VAR=value`` words are its
environment) or ``console`` (a transcript: a line ``$ CMD`` is a command, the lines under it
its expected output). Every other fence must be tagged ``text``, ``yaml`` or ``python`` and
hold no line that looks like a shell command; an untagged fence fails, so no command escapes.

**Placeholders.** The docs name finished runs with shell variables: ``RUN`` (a GPT run),
``BERT_RUN`` (a BERT run) and ``SWEEP`` (a sweep directory), defined in the docs by a line
``RUN=runs/2026-01-01/12-00-00`` and so on (``PLACEHOLDERS`` checks the form). Here each one is
the output directory of the docs' own command that makes it (``PRODUCERS``), run first; every
``$RUN``, ``$BERT_RUN`` and ``$SWEEP`` in a later command is replaced by that directory. Any other
``$`` in a command that runs fails the test.

**Running.** A command runs in a scratch working directory that holds the small files the docs
name (``heldout.txt``, ``big.txt``, ...). ``python train.py ...`` trains with ``TINY`` overrides:
a key the command sets to one value gets the tiny value instead, a key it sweeps keeps the
docs' values, the others are appended; ``logger=none`` unless the command picks a logger, and
``hydra.run.dir`` / ``hydra.sweep.dir`` inside the scratch directory unless it names one. Modes
that read a checkpoint (eval, generate, attention, export) get no tiny overrides: they refuse
model settings unlike the checkpoint's. ``python -m bench.NAME ...`` runs with the quickest
options in ``QUICK`` instead of the documented ones. ``FAILS`` lists the commands the docs show
failing, with the exit code and message they must give.

Commands that come out the same after these rules (same changes to the test's environment,
same set of arguments) run once. To pay Python's start-up and imports once, not once per
command, a server process (``tests/fork_server.py``) imports tinylm and forks a fresh child
per command, which runs ``train.py`` (or the module) as ``__main__`` with the command's argv,
environment and working directory, as the shell would; its exit code is the command's. The
commands share the scratch directory and run one after another, but for the benchmarks that
write only in temporary directories of their own (``BESIDE``): a second server runs them at
the same time. ``tests/docs_commands.py`` reads the commands out of the Markdown.

The test fails when a command in the docs is neither run nor listed in ``NOT_RUNNABLE``, and
when a listed command is no longer in the docs. The lists live in ``tests/docs_lists.py``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conf.features import feature_modes
from modes import MODES
from tests.conftest import ROOT
from tests.docs_commands import (
    Command,
    fenced_blocks,
    heading_anchors,
    is_sweep_value,
    shell_commands,
    split_env,
    substitute,
)
from tests.docs_lists import (
    BESIDE,
    DOCS,
    FAILS,
    INPUT_WRITERS,
    MODE_ARGS,
    NOT_RUNNABLE,
    OTHER_TAGS,
    PLACEHOLDERS,
    PRODUCERS,
    PROMISES,
    QUICK,
    SERVER,
    SHAKESPEARE,
    SHELL_LOOKING,
    SHELL_TAGS,
    TINY,
    TINY_BUDGETS,
)

# ---------------------------------------------------------------------------------------------
# The docs' commands


def doc_commands() -> list[Command]:
    commands = []
    for path in DOCS:
        name = path.relative_to(ROOT).as_posix()
        for tag, first_line, body in fenced_blocks(path.read_text()):
            if tag in SHELL_TAGS:
                commands.extend(shell_commands(tag, body, name, first_line))
    return [c for c in commands if not of_removed_feature(c.text)]


def of_removed_feature(text: str) -> bool:
    """A command of a feature whose folder is not there (``mode=NAME`` of no present feature,
    ``python -m features.NAME``, ``hydra/sweeper=NAME``): the core's guides may show it, and
    deleting the folder removes it. A feature's mode may be named apart from its folder
    (``mode=coordcheck`` is the mup feature's)."""
    named = re.findall(r"(?<![.\w])mode=(\w+)|-m features\.(\w+)|hydra/sweeper=(\w+)", text)
    modes = {**MODES, **feature_modes()}
    return any(
        mode not in modes if mode else name != "basic" and not (ROOT / "features" / name).is_dir()
        for mode, module, sweeper in named
        for name in [module or sweeper]
    )


def is_placeholder_definition(text: str) -> bool:
    env, words = split_env(text)
    return not words and len(env) == 1 and next(iter(env)) in PLACEHOLDERS


# ---------------------------------------------------------------------------------------------
# Turning a docs command into a job
@dataclass
class Job:
    key: tuple  # what makes two commands the same job
    env: dict[str, str]
    argv: list[str]  # for the child: [script, *args] or ["-m", module, *args]
    out: str | None  # the output directory (train.py), relative to the scratch directory
    commands: list[str] = field(default_factory=list)  # the docs commands it stands for


def reads_checkpoint(args: list[str]) -> bool:
    """Whether the command is a mode that reads a checkpoint (any but train): it takes the
    checkpoint's model, no tiny keys."""
    return any(a.startswith("mode=") and a != "mode=train" for a in args)


def train_args(args: list[str], tiny: bool) -> tuple[list[str], str | None]:
    """The arguments ``python train.py ARGS`` runs with here (without an output directory),
    and the output directory the command names itself, if it does."""
    multirun = "-m" in args or "--multirun" in args
    keys = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in args if "=" in a}
    result = list(args)
    if tiny and not reads_checkpoint(args):
        budgets = [k for k in keys if k in TINY_BUDGETS]
        result = [f"{k}={TINY_BUDGETS[k]}" if k in budgets else a for a, k in _keyed(result)]
        tiny_keys = {k: v for k, v in TINY.items() if not (budgets and k == "trainer.max_steps")}
        for key, value in tiny_keys.items():
            if key in keys and not (multirun and is_sweep_value(keys[key])):
                result = [f"{key}={value}" if a.startswith(f"{key}=") else a for a in result]
            elif key not in keys:
                result.append(f"{key}={value}")
        if not any(k == "logger" or k.startswith("logger.") for k in keys):
            result.append("logger=none")
    for mode, extra in MODE_ARGS.items():  # a feature's mode, made quick
        if tiny and mode in args and not any(a.split("=")[0] in keys for a in extra[:1]):
            result.extend([*extra, "logger=none"])
    return result, keys.get("hydra.sweep.dir" if multirun else "hydra.run.dir")


def _keyed(args: list[str]) -> list[tuple[str, str | None]]:
    """Each argument with its key (None for a flag or a value-less word)."""
    return [(a, a.split("=", 1)[0] if "=" in a else None) for a in args]


def build_jobs(commands: list[Command], ws: Path) -> tuple[list[Job], dict[str, Job]]:
    """The jobs to run, producers first, and the job of each docs command that runs."""
    texts = list(dict.fromkeys(c.text for c in commands))
    runnable = [t for t in texts if t not in NOT_RUNNABLE and not is_placeholder_definition(t)]
    ordered = [*PRODUCERS.values(), *(t for t in runnable if t not in PRODUCERS.values())]
    jobs: dict[tuple, Job] = {}
    of_command: dict[str, Job] = {}
    dirs: dict[str, str] = {}
    for text in ordered:
        env, words = split_env(substitute(text, dirs))
        # What the command changes in this environment (OMP_NUM_THREADS=1 changes nothing
        # where each test worker already has one thread): commands alike in it run once.
        changed = tuple(sorted((k, v) for k, v in env.items() if os.environ.get(k) != v))
        if words[:2] == ["python", "train.py"]:
            args, out = train_args(words[2:], tiny=text not in FAILS)
            key = ("train.py", changed, frozenset(args))
            if key not in jobs and out is None:
                multirun = "-m" in args
                out = f"{'multirun' if multirun else 'runs'}/{len(jobs):02d}"
                args.append(f"hydra.{'sweep' if multirun else 'run'}.dir={out}")
            argv = [str(ROOT / "train.py"), *args]
        elif words[:2] == ["python", "-m"] and text in QUICK:
            argv, out = ["-m", words[2], *(a.replace("{ws}", str(ws)) for a in QUICK[text])], None
            key = ("module", changed, tuple(argv))
        else:
            raise AssertionError(
                f"{text!r} is neither runnable here (python train.py ..., or a benchmark in "
                "QUICK) nor listed in NOT_RUNNABLE with its reason"
            )
        job = jobs.get(key)
        if job is None:
            job = jobs[key] = Job(key, env, argv, out)
        job.commands.append(text)
        of_command[text] = job
        for name, producer in PRODUCERS.items():
            if text == producer:
                dirs[name] = str(ws / job.out)
    return list(jobs.values()), of_command


def write_inputs(ws: Path) -> None:
    """The small files the docs' commands name, in the scratch directory: the core's, then
    each feature's (``INPUT_WRITERS``)."""
    from pydoc_data.topics import topics

    paragraphs = [p.strip() for k in sorted(topics) for p in topics[k].split("\n\n") if p.strip()]
    text = "\n\n".join(paragraphs)
    (ws / "corpus.txt").write_text(text[:60_000])
    (ws / "heldout.txt").write_text(text[-4_000:])
    for name, part in zip(
        ("a", "b", "c"), (text[:40_000], text[40_000:50_000], text[50_000:60_000]), strict=True
    ):
        (ws / f"{name}.txt").write_text(part)
    rows = [json.dumps({"text": p}) for p in paragraphs[:400]]
    (ws / "corpus.jsonl").write_text("\n".join(rows) + "\n")
    (ws / "big.txt").write_text(text[:200_000])
    shakespeare = SHAKESPEARE.read_text()[:60_000] if SHAKESPEARE.is_file() else text[:60_000]
    (ws / "path" / "to").mkdir(parents=True)
    (ws / "path" / "to" / "tinyshakespeare.txt").write_text(shakespeare)
    for write in INPUT_WRITERS:
        write(ws, paragraphs)


@dataclass
class Ran:
    jobs: list[Job]
    of_command: dict[str, Job]
    results: dict[int, dict]  # id(job) -> {"rc", "seconds", "log"}
    ws: Path
    dirs: dict[str, str]


COMMANDS = doc_commands()


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Ran:
    ws = tmp_path_factory.mktemp("docs-commands")
    write_inputs(ws)
    jobs, of_command = build_jobs(COMMANDS, ws)
    logs = ws / "logs"
    logs.mkdir()
    specs: dict[str, list[int]] = {"in_order": [], "beside": []}
    for i, job in enumerate(jobs):
        beside = job.argv[0] == "-m" and job.argv[1] in BESIDE
        specs["beside" if beside else "in_order"].append(i)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    env.pop("TINYLM_DEBUG", None)
    servers = []
    for name, numbers in specs.items():
        spec = {
            "root": str(ROOT),
            "jobs": [
                {
                    "argv": jobs[i].argv,
                    "env": jobs[i].env,
                    "cwd": str(ws),
                    "log": str(logs / f"{i:02d}.log"),
                    "timeout": 180,
                }
                for i in numbers
            ],
        }
        (ws / f"{name}.json").write_text(json.dumps(spec, indent=1))
        command = [
            sys.executable,
            str(SERVER),
            str(ws / f"{name}.json"),
            str(ws / f"{name}-results.json"),
        ]
        servers.append(subprocess.Popen(command, cwd=ws, env=env))
    for server in servers:
        try:
            server.wait(timeout=900)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    results = {}
    for name, numbers in specs.items():
        path = ws / f"{name}-results.json"
        done = json.loads(path.read_text()) if path.exists() else []
        for k, i in enumerate(numbers):
            log = logs / f"{i:02d}.log"
            stopped = {"rc": "not run (the server stopped)", "seconds": 0}
            result = done[k] if k < len(done) else stopped
            results[id(jobs[i])] = {**result, "log": log.read_text() if log.exists() else ""}
    dirs = {name: str(ws / of_command[producer].out) for name, producer in PRODUCERS.items()}
    return Ran(jobs, of_command, results, ws, dirs)


# ---------------------------------------------------------------------------------------------
# Tests


def test_parser_reads_continuations_comments_and_environments() -> None:
    body = [
        "# a comment line",
        "A=1 B='x y' python train.py \\",
        "    model=bert   # the encoder",
        'python train.py prompt="a # b \\" c"  # c',
        """python train.py prompt="it's" \\#x # d""",
        "",
    ]
    commands = shell_commands("bash", body, "x.md", 10)
    assert [c.text for c in commands] == [
        "A=1 B='x y' python train.py model=bert",
        'python train.py prompt="a # b \\" c"',
        """python train.py prompt="it's" \\#x""",
    ]
    assert commands[0].where == "x.md:11"
    assert split_env(commands[0].text) == (
        {"A": "1", "B": "x y"},
        ["python", "train.py", "model=bert"],
    )
    console = shell_commands("console", ["$ python train.py x=1", "tinylm: error: no"], "y.md", 1)
    assert console == [Command("python train.py x=1", "y.md:1", ("tinylm: error: no",))]


def test_tiny_overrides_replace_append_and_keep_sweeps() -> None:
    args, out = train_args(["-m", "model.num_layers=2,4", "trainer.max_steps=400"], True)
    assert "model.num_layers=2,4" in args and "trainer.max_steps=2" in args
    assert "trainer.max_steps=400" not in args and "logger=none" in args and out is None
    args, out = train_args(["mode=eval", "ckpt_path=x", "hydra.run.dir=here"], True)
    assert args == ["mode=eval", "ckpt_path=x", "hydra.run.dir=here"] and out == "here"
    args, _ = train_args(["trainer.budget.flops=3.4e12", "model.hidden_size=64"], True)
    assert "trainer.budget.flops=3e9" in args and "model.hidden_size=32" in args
    assert not any(a.startswith("trainer.max_steps=") for a in args)


def test_no_shell_command_escapes_the_parser() -> None:
    problems = []
    for path in DOCS:
        name = path.relative_to(ROOT).as_posix()
        for tag, first_line, body in fenced_blocks(path.read_text()):
            if tag not in (*SHELL_TAGS, *OTHER_TAGS):
                problems.append(f"{name}:{first_line - 1}: a fence tagged {tag!r}")
            elif tag in OTHER_TAGS:
                for number, line in enumerate(body, start=first_line):
                    if SHELL_LOOKING.match(line):
                        problems.append(f"{name}:{number}: a command in a {tag} block: {line}")
            elif tag == "console":
                for number, line in enumerate(body, start=first_line):
                    if line.startswith("$") and not line.startswith("$ "):
                        problems.append(f"{name}:{number}: write a console command as '$ CMD'")
    assert not problems, "\n".join(problems)


def test_the_docs_have_commands_and_the_producers() -> None:
    texts = {c.text for c in COMMANDS}
    assert len(texts) > 40
    for name, producer in PRODUCERS.items():
        assert producer in texts, f"the docs no longer run {producer!r}, which makes ${name}"


# The README's everyday commands: a front page that lost one of these lost its purpose.
EVERYDAY = (
    "python train.py",
    "python train.py model=bert",
    "python train.py -m model.num_heads=1,2,4,8 model.dropout=0.0,0.1,0.2",
    "python train.py mode=eval ckpt_path=$RUN",
    "python train.py mode=generate ckpt_path=$RUN/checkpoints/best.ckpt",
    "python train.py mode=attention ckpt_path=$RUN/checkpoints/best.ckpt",
    "python train.py mode=export ckpt_path=$RUN/checkpoints/best.ckpt",
    "python train.py data.path=corpus.txt",
    "python train.py experiment=shakespeare_char",
    "python train.py trainer=ddp",
)


def test_the_readme_shows_the_everyday_commands() -> None:
    readme = [c.text for c in COMMANDS if c.where.startswith("README.md:")]
    shown = [e for e in EVERYDAY if not of_removed_feature(e)]  # a feature's goes with it
    missing = [e for e in shown if not any(t == e or t.startswith(e + " ") for t in readme)]
    assert not missing, f"the README no longer shows {missing}"


def test_every_command_is_run_or_listed() -> None:
    unknown = []
    for command in COMMANDS:
        text = command.text
        if text in NOT_RUNNABLE:
            continue
        env, words = split_env(text)
        if is_placeholder_definition(text):
            name, value = next(iter(env.items()))
            assert re.fullmatch(PLACEHOLDERS[name], value), f"{command.where}: {text}"
        elif words[:2] != ["python", "train.py"] and text not in QUICK:
            unknown.append(f"{command.where}: {text}")
    assert not unknown, "neither run nor in NOT_RUNNABLE (add it with its reason):\n" + "\n".join(
        unknown
    )


def test_listed_commands_are_still_in_the_docs() -> None:
    texts = {c.text for c in COMMANDS}
    for table in (NOT_RUNNABLE, QUICK, FAILS, PROMISES):
        stale = [t for t in table if t not in texts]
        assert not stale, f"listed here but no longer in the docs: {stale}"


def test_placeholders_are_defined_where_used() -> None:
    """A file that uses $RUN (say) also shows how to set it."""
    for path in DOCS:
        name = path.relative_to(ROOT).as_posix()
        commands = [c for c in COMMANDS if c.where.startswith(f"{name}:")]
        defined = {
            next(iter(split_env(c.text)[0])) for c in commands if is_placeholder_definition(c.text)
        }
        used = {
            v
            for c in commands
            if c.text not in NOT_RUNNABLE
            for v in re.findall(r"\$\{?([A-Za-z_]\w*)", c.text)
        }
        assert used <= defined, f"{name} uses ${sorted(used - defined)} without defining them"


# Each runnable command once, named by where the docs first show it.
RUNNABLE = {
    c.text: c.where
    for c in reversed(COMMANDS)
    if c.text not in NOT_RUNNABLE and not is_placeholder_definition(c.text)
}


@pytest.mark.slow
@pytest.mark.parametrize("text", sorted(RUNNABLE, key=RUNNABLE.get), ids=RUNNABLE.get)
def test_docs_command_runs(text: str, ran: Ran) -> None:
    job = ran.of_command[text]
    result = ran.results[id(job)]
    log = result["log"][-4000:]
    if text.startswith("python -m bench.data --make-corpus") and not SHAKESPEARE.is_file():
        pytest.skip(f"the benchmark reads {SHAKESPEARE}, which this checkout lacks")
    if "mode=harness" in text:  # the eval extra (CI installs it): skipped where it is missing
        pytest.importorskip("accelerate", reason='lm-eval: pip install -e ".[eval]"')
    if text in FAILS:
        code, message = FAILS[text]
        assert result["rc"] == code, f"{text}: exit {result['rc']}, not {code}\n{log}"
        expected = [message] if message else next(c.output for c in COMMANDS if c.text == text)
        for line in expected:
            assert line in result["log"], f"{text}: {line!r} not in its output\n{log}"
        return
    assert result["rc"] == 0, f"{text} (as {job.argv[1:]}): exit {result['rc']}\n{log}"
    promised = list(PROMISES.get(text, []))
    if job.out is not None and not reads_checkpoint(job.argv):
        promised.append("{out}/summary.md" if "-m" in job.argv else "{out}/metrics.json")
    for item in promised:
        item = substitute(item.replace("{out}", job.out or ""), ran.dirs)
        assert (ran.ws / item).exists(), f"{text}: promised {item} is missing\n{log}"
    if "{out}/metrics.json" in promised and "-m" not in job.argv:
        metrics = json.loads((ran.ws / job.out / "metrics.json").read_text())
        assert metrics.get("status") == "completed", metrics


@pytest.mark.parametrize(
    "text", [t for t in NOT_RUNNABLE if "python train.py" in t and "&&" not in t], ids=str
)
def test_listed_train_commands_compose(text: str) -> None:
    """A listed ``python train.py`` command still parses, and its (first) job composes."""
    from hydra import compose, initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from conf.features import comma_lists
    from train import verbatim_prompt

    words = split_env(text)[1]
    args = comma_lists(verbatim_prompt(words[words.index("train.py") + 1 :]))
    args = [a for a in args if a != "-m"]
    first = []
    for override in OverridesParser.create().parse_overrides(args):
        if override.is_interval_sweep():  # an Optuna search's range: its low end
            value = override.value().start
        elif override.is_sweep_override():
            value = next(iter(override.sweep_string_iterator()))
            first.append(f"{override.get_key_element()}={value}")
        else:
            first.append(override.input_line)
    first = [a for a in first if not a.startswith(("hydra/launcher=", "hydra.launcher."))]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[*first, "output_dir=unused"])
    assert cfg.mode == next((a[len("mode=") :] for a in first if a.startswith("mode=")), "train")


def removed_feature(linked: Path) -> bool:
    """A link into a feature's folder that is not there: deleting the folder removes the
    feature, its guide included (ARCHITECTURE.md, "Features")."""
    parts = linked.relative_to(ROOT).parts if linked.is_relative_to(ROOT) else ()
    return len(parts) > 1 and parts[0] == "features" and not (ROOT / "features" / parts[1]).is_dir()


def test_relative_links_and_images_resolve() -> None:
    broken = []
    for path in DOCS:
        text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            file, _, anchor = target.partition("#")
            linked = (path.parent / file).resolve() if file else path
            if removed_feature(linked):
                continue
            if not linked.exists() or (anchor and anchor not in heading_anchors(linked)):
                broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert not broken, broken
