"""lm-evaluation-harness on a decoder (features/harness/runner.py) in memory, in seconds: an
untrained tiny decoder with random weights and a character tokenizer (no training run), local
YAML tasks, and a stand-in for the harness's own catalogue of ~15,000 tasks (indexing that takes
10-20 s a time; test_harness.py reads the real one). Pinned down: every request is answered with
the log-likelihood recounted from the decoder's logits and the metric rows recount the answers
(limits, few-shot prompts, a group's counts, hand-made results at their edges); which names are
tasks (wildcards, groups of groups, inline configs, tags, YAML paths, groups that hold
themselves) and the message that names the unknown ones with their close matches; which tasks
read the Hugging Face Hub; and each refusal's message whole. Each test kills mutants that the
tests of test_harness.py, which load trained checkpoints, are too slow to meet (``python -m
tools.mutation --module features/harness/runner.py``)."""

from __future__ import annotations

import copy
import importlib.abc
import json
import logging
import math
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from conf.schema import OptimConfig
from data.config import DataConfig
from data.hub import hub_unavailable_reason
from data.tokenizer import special_tokens_of, tokenizer_from_json, train_tokenizer
from features.harness.config import HarnessConfig
from features.harness.runner import (
    check_harness_checkpoint,
    check_hub_reachable,
    harness_model,
    metric_rows,
    require_harness,
    run_harness,
    task_manager,
)
from tests.features.harness.test_harness import (
    AGGREGATE,
    DOCS,
    TOLERANCE,
    randomised,
    tinylm_loglikelihood,
    write_task,
)
from tests.tiny_models import tiny_config
from training.checkpoint import LoadedCheckpoint, load_checkpoint
from training.task import task_class

pytest.importorskip("accelerate", reason='the harness\'s HF model: pip install -e ".[eval]"')

import lm_eval.tasks.manager  # noqa: E402  (after the skip: the eval extra)

CONTEXT = 128  # characters: the longest one-shot prompt and choice fit whole
INSTALL_HINT = 'pip install -e ".[eval]"'
OFFLINE_ADVICE = (
    "Run it once with the network (the datasets cache keeps the data; later runs may set "
    "HF_DATASETS_OFFLINE=1), or use local data: a task YAML with dataset_path: json and "
    "dataset_kwargs: {data_files: ...} in harness.include=DIR"
)
# The stand-in catalogue: the harness's own tasks as far as these tests need them.
CATALOGUE = {
    "arc_easy": "task: arc_easy\ndataset_path: allenai/ai2_arc\ntag: ai2_arc\n",
    "arc_challenge": "task: arc_challenge\ndataset_path: allenai/ai2_arc\ntag: ai2_arc\n",
    "hellaswag": "task: hellaswag\ndataset_path: Rowan/hellaswag\n",
}
CATALOGUE_NAMES = sorted([*CATALOGUE, "ai2_arc"])  # its tasks and its one tag
# Names only (never run): tasks that read local files, the Hub or a function of their own,
# groups, a tag. The four zqxchoice tasks are ever less like "zqxchoice" (difflib's ratio
# 2 * 9 / (9 + len): 0.95, 0.90, 0.86, 0.82).
CLOSE = ["zqxchoice1", "zqxchoice12", "zqxchoice123", "zqxchoice1234"]
HUB_A, HUB_B, HUB_C, HUB_D = (f"tinylm-tests/hub-{x}" for x in "abcd")


def _named_tasks(folder: Path) -> dict[str, str]:
    """name -> YAML text of the tasks, groups and tag-carrying tasks in ``folder``."""
    inline_hub = {"task": "inline_hub", "dataset_path": HUB_D}
    inline_group = {"group": "inner", "task": ["hubby"]}
    return {
        **{name: f"task: {name}\ndataset_path: json\n" for name in CLOSE},
        "hubby": f"task: hubby\ndataset_path: {HUB_A}\n",
        "hubby_tagged": f"task: hubby_tagged\ndataset_path: {HUB_B}\ntag: hubtag\n",
        "localdir": f"task: localdir\ndataset_path: {folder}\n",
        "custom": f"task: custom\ndataset_path: {HUB_C}\ncustom_dataset: !function utils.load\n",
        "pyt": "task: pyt\nclass: !function utils.OwnTask\n",
        # The order matters: a task without a Hub dataset before the ones with.
        "mix": "group: mix\ntask: "
        + json.dumps(["custom", "pyt", CLOSE[0], inline_hub, inline_group, "hubtag"])
        + "\n",
        "single": f"group: single\ntask: {CLOSE[1]}\n",  # one task, not a list
        "loop": f"group: loop\ntask: [loop, {CLOSE[2]}]\n",  # names itself
        "broken": "group: broken\ntask: "
        + json.dumps([CLOSE[0], "nosuch", {"group": "inner2", "task": ["nosuch2"]}])
        + "\n",
        "catalogued": f"group: catalogued\ntask: [{CLOSE[0]}, arc_easy]\n",
    }


def _index_of_named(folder: Path) -> list[str]:
    """What the index of ``folder``'s named tasks lists: them and their tag."""
    return sorted([*_named_tasks(folder), "hubtag"])


@pytest.fixture(scope="module")
def named(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("named")
    for name, text in _named_tasks(folder).items():
        (folder / f"{name}.yaml").write_text(text)
    return folder


@pytest.fixture(scope="module")
def catalogue(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("catalogue")
    for name, text in CATALOGUE.items():
        (folder / f"{name}.yaml").write_text(text)
    return folder


@pytest.fixture(autouse=True)
def stand_in_catalogue(catalogue: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness indexes its own tasks from the folder of lm_eval/tasks/manager.py: here,
    from the stand-in catalogue's."""
    monkeypatch.setattr(lm_eval.tasks.manager, "__file__", str(catalogue / "manager.py"))


@pytest.fixture(scope="module")
def scored(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tasks the harness runs: choice (DOCS, a one-shot prompt draws from them), second (the
    first three docs), the group both of the two, and hubby on a Hub dataset."""
    folder = tmp_path_factory.mktemp("scored")
    write_task(folder, "choice", fewshot_split="test")
    write_task(folder, "second", DOCS[:3])
    write_task(folder, "hubby", dataset_path=HUB_A)
    (folder / "both.yaml").write_text(f"group: both\ntask: [choice, second]\n{AGGREGATE}")
    return folder


def _tokenizer_texts() -> list[str]:
    """Every doc's context and choice as a prompt gives them, one-shot prompts included."""
    shots = [d["context"] + " " + c + "\n\n" for d in DOCS for c in d["choices"]]
    return [*shots, "".join(shots)]


@pytest.fixture(scope="module")
def decoder(tmp_path_factory: pytest.TempPathFactory) -> LoadedCheckpoint:
    """An untrained tiny decoder (GPT-2's layout) with a character tokenizer of the docs,
    saved as training saves it, loaded and given large random weights."""
    tokenizer = train_tokenizer("char", [_tokenizer_texts()], 300)
    torch.manual_seed(0)
    task = task_class("decoder")(
        model_config=tiny_config(
            vocab_size=tokenizer.get_vocab_size(with_added_tokens=True), max_seq_len=CONTEXT
        ),
        optim_config=OptimConfig(
            lr=1e-3, weight_decay=0.1, beta1=0.9, beta2=0.95, warmup_steps=1, min_lr_ratio=0.1
        ),
        tokenizer_json=tokenizer.to_str(),
        data_config=DataConfig(tokenizer="char"),
        chars_per_token={},
        total_steps=10,
    )
    path = tmp_path_factory.mktemp("decoder") / "checkpoints" / "last.ckpt"
    path.parent.mkdir()
    payload = {"state_dict": task.state_dict(), "hyper_parameters": dict(task.hparams)}
    torch.save({**payload, "global_step": 3}, path)
    return randomised(load_checkpoint(path))


def _recounted(decoder: LoadedCheckpoint, sample: dict[str, Any]) -> list[float]:
    """log P(continuation | context) of each of the sample's requests, from the decoder's
    logits in float64."""
    exact = copy.deepcopy(decoder.model).double()
    tokenizer = tokenizer_from_json(decoder.tokenizer_json)
    return [tinylm_loglikelihood(exact, tokenizer, *request) for request in sample["arguments"]]


def _answered(sample: dict[str, Any]) -> list[float]:
    return [loglikelihood for loglikelihood, _greedy in sample["filtered_resps"]]


def _close(got: list[float], want: list[float]) -> bool:
    return len(got) == len(want) and all(
        abs(g - w) <= TOLERANCE * max(1.0, abs(w)) for g, w in zip(got, want, strict=True)
    )


# ------------------------------------------------------------------- metric rows, by hand


def _row(task: str, metric: str, value: float, **fields: Any) -> dict[str, Any]:
    """A metric row (filter none), with None for the fields not given."""
    unset = ("task_version", "num_fewshot", "n", "n_total", "stderr", "higher_is_better")
    return {
        **dict.fromkeys(unset),
        "task": task,
        "metric": metric,
        "filter": "none",
        "value": value,
        **fields,
    }


def test_rows_are_each_task_and_groups_metric_with_its_stderr_and_counts() -> None:
    """A task scored on 4 of its 5 examples; a task under two filters (one whose name holds
    a comma), an integer value, a flag and a stderr the harness could not compute; a group
    only in ``groups`` (as a harness may report it) whose counts are its tasks' sums; the
    task's name, alias and sample count are no metrics."""
    results = {
        "results": {
            "choice": {
                "name": "choice",
                "alias": "choice",
                "sample_len": 4,
                "acc,none": 0.75,
                "acc_stderr,none": 0.25,
                "acc_norm,none": 0.5,
                "acc_norm_stderr,none": "N/A",
            },
            "gen": {
                "alias": "gen",
                "exact_match,strict-match": 0.5,
                "exact_match_stderr,strict-match": 0.125,
                "exact_match,take,first": 1,
                "exact_match_stderr,take,first": 0,
                "is_greedy,none": True,
            },
        },
        "groups": {"both": {"alias": "both", "acc,none": 0.6, "acc_stderr,none": 0.2}},
        "group_subtasks": {"both": ["choice", "gen"]},
        "versions": {"choice": 2.0, "gen": 1.0, "both": "N/A"},
        "n-shot": {"choice": 0, "gen": 3, "both": 0},
        "higher_is_better": {"choice": {"acc": True, "acc_norm": True}, "both": {"acc": True}},
        "n-samples": {
            "choice": {"original": 5, "effective": 4},
            "gen": {"original": 10, "effective": 2},
        },
    }
    choice = {"task_version": 2.0, "num_fewshot": 0, "n": 4, "n_total": 5}
    gen = {"task_version": 1.0, "num_fewshot": 3, "n": 2, "n_total": 10}
    assert metric_rows(results) == [
        _row("choice", "acc", 0.75, stderr=0.25, higher_is_better=True, **choice),
        _row("choice", "acc_norm", 0.5, higher_is_better=True, **choice),
        _row("gen", "exact_match", 0.5, filter="strict-match", stderr=0.125, **gen),
        _row("gen", "exact_match", 1.0, filter="take,first", stderr=0.0, **gen),
        _row(
            "both",
            "acc",
            0.6,
            stderr=0.2,
            higher_is_better=True,
            task_version="N/A",
            num_fewshot=0,
            n=4 + 2,
            n_total=5 + 10,
        ),
    ]


def test_a_groups_counts_come_from_its_tasks_down_to_those_that_have_them() -> None:
    """A group of a group and a task sums the inner group's tasks; a group with a task whose
    counts are missing has none, as has a task without counts of its own."""
    results = {
        "results": {
            name: {"acc,none": 0.5} for name in ("outer", "inner", "a", "b", "c", "lost", "x")
        },
        "group_subtasks": {"outer": ["inner", "c"], "inner": ["a", "b"], "lost": ["a", "x"]},
        "n-samples": {
            "a": {"original": 7, "effective": 3},
            "b": {"original": 11, "effective": 5},
            "c": {"original": 13, "effective": 13},
        },
    }
    counts = {row["task"]: (row["n"], row["n_total"]) for row in metric_rows(results)}
    assert counts == {
        "outer": (3 + 5 + 13, 7 + 11 + 13),
        "inner": (3 + 5, 7 + 11),
        "a": (3, 7),
        "b": (5, 11),
        "c": (13, 13),
        "lost": (None, None),
        "x": (None, None),
    }


def test_results_with_nothing_but_values_give_rows_without_the_rest() -> None:
    assert metric_rows({"results": {"t": {"acc,none": 0.25}}}) == [_row("t", "acc", 0.25)]
    assert metric_rows({"results": {"t": {"acc,none": 0.25}}, "n-samples": {}}) == [
        _row("t", "acc", 0.25)
    ]


# ------------------------------------------------------------------------------- refusals


def _loaded(path: Path, arch: str, **fields: Any) -> LoadedCheckpoint:
    config = tiny_config(arch, **fields)
    return LoadedCheckpoint(path, torch.nn.Identity(), config, {}, 0)


def test_an_encoder_is_sent_to_minimal_pairs_or_fine_tuning() -> None:
    path = Path("runs/bert/checkpoints/best.ckpt")
    with pytest.raises(ValueError) as err:
        check_harness_checkpoint(_loaded(path, "encoder"))
    assert str(err.value) == (
        f"{path} is an encoder: mode=harness scores next-token log-likelihoods, which a "
        "masked language model does not give. Score an encoder with mode=pairs (minimal "
        "pairs), or fine-tune it on the task (mode=finetune)"
    )


def test_a_decoder_gpt2_cannot_reproduce_is_refused_with_what_to_do_instead() -> None:
    path = Path("runs/gpt/checkpoints/best.ckpt")
    check_harness_checkpoint(_loaded(path, "decoder"))  # GPT-2's layout: scored
    with pytest.raises(ValueError) as err:
        check_harness_checkpoint(_loaded(path, "decoder", norm="post"))
    message = str(err.value)
    assert message.startswith("this decoder has no exact GPT-2 equivalent: model.norm=post")
    assert message.endswith(
        ". mode=harness scores that Hugging Face model; mode=eval scores this checkpoint on text"
    )


class _BrokenInstall(importlib.abc.MetaPathFinder):
    """An import of the harness's Hugging Face model that fails without naming a module (a
    dependency's own ImportError, say)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname == "lm_eval.models.huggingface":
            raise ImportError("transformers is too old for this lm-eval")


@pytest.mark.parametrize("missing", ["accelerate", None])
def test_a_missing_harness_names_what_is_missing_and_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, missing: str | None
) -> None:
    monkeypatch.delitem(sys.modules, "lm_eval.models.huggingface", raising=False)
    if missing:
        monkeypatch.setitem(sys.modules, missing, None)  # `import accelerate` fails
    else:
        monkeypatch.setattr(sys, "meta_path", [_BrokenInstall(), *sys.meta_path])
    with pytest.raises(ValueError) as err:
        require_harness()
    assert str(err.value) == (
        "mode=harness needs EleutherAI's lm-evaluation-harness with Hugging Face "
        f"transformers ({missing or 'lm-eval'} is not installed): {INSTALL_HINT}"
    )


def test_an_include_that_is_no_directory_of_yamls_is_refused(tmp_path: Path) -> None:
    nowhere = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError) as missing:
        task_manager(["x"], str(nowhere))
    assert str(missing.value) == (
        f"harness.include={nowhere} is not a directory; pass a directory of task YAML "
        "files (lm-eval --include_path)"
    )
    (tmp_path / "notes.txt").write_text("no tasks\n")
    (tmp_path / "upper.YAML").write_text("task: upper\ndataset_path: json\n")
    with pytest.raises(ValueError) as empty:
        task_manager(["x"], str(tmp_path))
    assert str(empty.value) == (
        f"harness.include={tmp_path} holds no task YAML (*.yaml, in it or below); write "
        "one per task (task:, dataset_path:, output_type:, doc_to_text:, ...) or pass the "
        "directory that holds them"
    )
    below = tmp_path / "tasks" / "mine"
    below.mkdir(parents=True)
    (below / "mine.yaml").write_text("task: mine\ndataset_path: json\n")
    manager, names = task_manager(["mine"], str(tmp_path))  # a YAML below the directory
    assert (manager.all_tasks, names) == (["mine"], ["mine"])


# ---------------------------------------------------------------------------- task names


def test_the_include_directory_alone_answers_for_its_own_tasks(named: Path) -> None:
    """Groups (of inline configs and groups, of one task, one that names itself), tags,
    wildcards (each name once, in the order given) and YAML paths: all found in the directory,
    whose index is the one returned."""
    asked = ["mix", "single", "loop", CLOSE[1], "zqxchoice1?", "[z]qxchoice1?*", "zqxchoice*"]
    paths = [str(named / "own.yaml"), str(named / "own.yml")]
    manager, names = task_manager([*asked, "hubtag", *paths], str(named))
    assert manager.all_tasks == _index_of_named(named)
    assert names == ["mix", "single", "loop", *CLOSE[1:], CLOSE[0], "hubtag", *paths]


def test_a_name_beyond_the_directory_is_looked_up_in_the_harnesss_tasks_too(named: Path) -> None:
    manager, names = task_manager(["catalogued", "ai2_*"], str(named))
    assert manager.all_tasks == sorted([*_index_of_named(named), *CATALOGUE_NAMES])
    assert names == ["catalogued", "ai2_arc"]
    manager, names = task_manager(["hellaswag", "arc_*"], None)
    assert (manager.all_tasks, names) == (CATALOGUE_NAMES, ["hellaswag", *sorted(CATALOGUE)[:2]])


def test_a_group_that_holds_itself_through_a_tag_is_followed_once(tmp_path: Path) -> None:
    """The directory's group arc_easy replaces the harness's task of that name and names
    that task's tag, ai2_arc: the tag holds the group, which holds the tag."""
    (tmp_path / "arc_easy.yaml").write_text("group: arc_easy\ntask: [ai2_arc]\n")
    manager, names = task_manager(["ai2_arc"], str(tmp_path))
    assert names == ["ai2_arc"] and manager.task_index["arc_easy"].kind.name == "GROUP"
    assert manager.task_index["ai2_arc"].tags == {"arc_easy", "arc_challenge"}


def test_unknown_names_are_listed_with_their_close_matches(named: Path) -> None:
    """A misspelt name (its three closest, closest first), one like nothing, a wildcard that
    matches nothing and the tasks a group names (inline groups too) that nothing defines."""
    with pytest.raises(ValueError) as err:
        task_manager(["zqxchoice", "qqqq", "broken", "nomatch*"], str(named))
    count = len(_index_of_named(named)) + len(CATALOGUE_NAMES)
    assert str(err.value) == (
        "harness.tasks: unknown harness task(s) zqxchoice (did you mean zqxchoice1 or "
        "zqxchoice12 or zqxchoice123?), qqqq, nosuch, nosuch2, nomatch*: not among the "
        f"{count} tasks, groups and tags lm-eval lists or in harness.include={named} "
        "(`lm-eval ls tasks` prints them)"
    )
    with pytest.raises(ValueError) as err:
        task_manager(["hellaswagg"], None)
    assert str(err.value) == (
        "harness.tasks: unknown harness task(s) hellaswagg (did you mean hellaswag?): not among "
        f"the {len(CATALOGUE_NAMES)} tasks, groups and tags lm-eval lists (`lm-eval ls tasks` "
        "prints them)"
    )


# ------------------------------------------------------------------------ the Hub's tasks


def test_tasks_on_hub_datasets_fail_at_once_when_the_hub_is_off(
    named: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every Hub dataset below each name (sorted, each once): a group's inline task, its
    inline group's task and its tag's task, past a task with its own loader, a Python task
    and a local file; no name that reads only local data or a local folder."""
    import datasets

    manager, names = task_manager(["mix", "hubby", CLOSE[0], "localdir", "pyt"], str(named))
    check_hub_reachable(manager, names)  # offline mode: the datasets cache answers
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    check_hub_reachable(manager, [CLOSE[0], "localdir", "custom", "pyt", "single"])
    with pytest.raises(ConnectionError) as err:
        check_hub_reachable(manager, names)
    assert str(err.value) == (
        f"mode=harness cannot load its data (mix reads {HUB_A}, {HUB_B}, {HUB_D}; hubby "
        f"reads {HUB_A}): the Hugging Face Hub is {hub_unavailable_reason()}. {OFFLINE_ADVICE}"
    )


# ------------------------------------------------------------------ the harness's answers


def test_the_harness_model_is_the_decoder_built_quietly(
    decoder: LoadedCheckpoint, caplog: pytest.LogCaptureFixture
) -> None:
    """With lm-eval's loggers at INFO (as its own logging setup leaves them), building the
    model warns of nothing; it takes the batch size given and the decoder's context, and
    puts EOS, which starts every document, before an empty context."""
    caplog.set_level(logging.INFO, logger="lm_eval")
    lm = harness_model(decoder, 3)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    eos = special_tokens_of(tokenizer_from_json(decoder.tokenizer_json)).eos_id
    assert (lm.batch_size, lm.max_length, lm.prefix_token_id) == (3, CONTEXT, eos)


def test_each_request_is_answered_with_the_decoders_loglikelihood(
    decoder: LoadedCheckpoint, scored: Path
) -> None:
    """Every choice of every doc, three requests a forward pass; the accuracies and the
    stderr recounted from the log-likelihoods as the harness defines them."""
    cfg = HarnessConfig(tasks="choice", include=str(scored), batch_size=3)
    manager, names = task_manager(cfg.tasks, cfg.include)
    results = run_harness(decoder, manager, names, cfg, log_samples=True)
    samples = sorted(results["samples"]["choice"], key=lambda s: s["doc_id"])
    correct, correct_norm = [], []
    for sample, doc in zip(samples, DOCS, strict=True):
        assert sample["arguments"] == [(doc["context"], " " + c) for c in doc["choices"]]
        expected = _recounted(decoder, sample)
        assert _close(_answered(sample), expected)
        correct.append(max(range(len(expected)), key=expected.__getitem__) == 0)
        per_char = [ll / len(c) for ll, c in zip(expected, doc["choices"], strict=True)]
        correct_norm.append(max(range(len(per_char)), key=per_char.__getitem__) == 0)
    assert len(samples) == len(DOCS) and results["config"]["batch_size"] == 3
    n = len(DOCS)
    acc, acc_norm = sum(correct) / n, sum(correct_norm) / n
    counts = {"task_version": 2.0, "num_fewshot": 0, "n": n, "n_total": n}
    assert metric_rows(results) == [
        _row("choice", metric, value, **counts, higher_is_better=True, stderr=stderr)
        for metric, value, stderr in [
            ("acc", pytest.approx(acc), pytest.approx(math.sqrt(acc * (1 - acc) / (n - 1)))),
            (
                "acc_norm",
                pytest.approx(acc_norm),
                pytest.approx(math.sqrt(acc_norm * (1 - acc_norm) / (n - 1))),
            ),
        ]
    ]


@pytest.mark.parametrize(("limit", "scored_docs"), [(1.0, 1), (2.0, 2), (0.5, 3)])
def test_a_limit_is_a_whole_number_of_examples_or_a_fraction_of_each_task(
    decoder: LoadedCheckpoint, scored: Path, limit: float, scored_docs: int
) -> None:
    """Without log_samples, no samples; a whole limit goes to the harness as an integer (as
    ``lm-eval --limit 2`` gives it), a fraction as it is (half of 5 docs: 3)."""
    cfg = HarnessConfig(tasks="choice", include=str(scored), limit=limit)
    manager, names = task_manager(cfg.tasks, cfg.include)
    results = run_harness(decoder, manager, names, cfg)
    assert "samples" not in results
    given = results["config"]["limit"]
    assert (given, type(given)) == ((int(limit), int) if limit >= 1 else (limit, float))
    rows = metric_rows(results)
    assert [(r["n"], r["n_total"]) for r in rows] == [(scored_docs, len(DOCS))] * 2


def test_a_one_shot_prompt_puts_another_answered_doc_first(
    decoder: LoadedCheckpoint, scored: Path
) -> None:
    cfg = HarnessConfig(tasks="choice", include=str(scored), limit=2.0, num_fewshot=1)
    manager, names = task_manager(cfg.tasks, cfg.include)
    results = run_harness(decoder, manager, names, cfg, log_samples=True)
    shots = {f"{d['context']} {d['choices'][0]}".strip(): d["context"] for d in DOCS}
    samples = sorted(results["samples"]["choice"], key=lambda s: s["doc_id"])
    for sample, doc in zip(samples, DOCS[:2], strict=True):
        prompt = sample["arguments"][0][0]
        shot, own = prompt.split("\n\n")
        assert own == doc["context"] and shots[shot.strip()] != doc["context"]
        assert _close(_answered(sample), _recounted(decoder, sample))
    assert [(r["num_fewshot"], r["n"]) for r in metric_rows(results)] == [(1, 2)] * 2


def test_a_group_is_scored_as_its_tasks_with_their_counts(
    decoder: LoadedCheckpoint, scored: Path
) -> None:
    cfg = HarnessConfig(tasks="both", include=str(scored), limit=2.0)
    manager, names = task_manager(cfg.tasks, cfg.include)
    rows = metric_rows(run_harness(decoder, manager, names, cfg))
    acc = {row["task"]: row for row in rows if row["metric"] == "acc"}
    assert [(t, r["n"], r["n_total"]) for t, r in acc.items()] == [
        ("choice", 2, len(DOCS)),
        ("second", 2, 3),
        ("both", 4, len(DOCS) + 3),
    ]
    assert acc["both"]["value"] == pytest.approx(
        (acc["choice"]["value"] + acc["second"]["value"]) / 2
    )


def test_a_hub_dataset_not_in_the_offline_cache_is_one_connection_error(
    decoder: LoadedCheckpoint, scored: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", True)
    cfg = HarnessConfig(tasks=["choice", "hubby"], include=str(scored))
    manager, names = task_manager(cfg.tasks, cfg.include)
    with pytest.raises(ConnectionError) as err:
        run_harness(decoder, manager, names, cfg)
    message = str(err.value)
    assert message.startswith("mode=harness cannot load its data (choice, hubby): ")
    assert message.endswith(f". {OFFLINE_ADVICE}") and "\n" not in message
