"""Minimal pairs (``mode=pairs pairs.path=...``) and the untrained baseline (``eval.weights``).

Sentence scores are checked against log-probabilities recomputed here in float64 from the
network's logits, one sentence (and, for PLL, one masked token) at a time; accuracies against
those scores with BLiMP's rule (good strictly above bad: a tie is wrong). Over a sweep, the
overall accuracy is grouped by configuration; each checkpoint is read once; the settings
mode=pairs does not read, and the old ``mode=eval eval.pairs=...``, are refused in one line."""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import features.pairs.command
import modes.eval
from analysis.run_record import write_record
from analysis.summary import configuration_rows, configuration_table, group_runs
from conf.features import feature_groups
from conf.hydra_runtime import parse_settings
from data.tokenizer import special_tokens_of, tokenizer_from_json
from features.pairs.command import pair_accuracy
from features.pairs.config import PairsConfig
from features.pairs.pair_sets import builtin_pairs, frame_sentence, read_pairs
from features.pairs.sentence_scores import decoder_log_likelihoods, pseudo_log_likelihoods
from models.transformer import build_model
from tests.conftest import compose_config, train_py
from tests.corpora import make_paragraphs
from tests.evaluation_helpers import WINDOW, untrained_checkpoint, with_weights_drawn_from
from tests.modes.test_modes import checkpoint_reads
from training.checkpoint import load_checkpoint, use_weights

SENTENCES = [
    "The class statement is executed.",
    "A name is bound to the object.",
    "Return the value.",
    "Exceptions are raised when an error occurs in the program.",
    "x",
]


def pairs_settings(ckpt: Path, *overrides: str, mode: str = "pairs"):
    """``mode=pairs`` (or ``mode``) on ``ckpt`` with ``overrides`` recorded as a command
    line's."""
    cfg = compose_config(f"mode={mode}", f"ckpt_path={ckpt}", *overrides)
    return replace(parse_settings(cfg), overrides=dict(o.split("=", 1) for o in overrides))


def _evaluate(ckpt: Path, *overrides: str) -> dict:
    """``mode=pairs``' run with ``overrides`` recorded as a command line's."""
    return features.pairs.command.run(pairs_settings(ckpt, *overrides))


def _framed(loaded, texts: list[str]) -> list[list[int]]:
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)
    cfg = loaded.config
    return [frame_sentence(tokenizer, t, cfg.arch, cfg.max_seq_len, "test") for t in texts]


def _decoder_loop(model, sequence: list[int]) -> float:
    """sum_i log p(x_i | x_<i) from the logits of the sentence alone, in float64."""
    with torch.no_grad():
        logits = model.eval()(torch.tensor([sequence[:-1]]))[0].double()  # (T - 1, V)
    log_probs = torch.log_softmax(logits, dim=-1)
    return sum(float(log_probs[j, sequence[j + 1]]) for j in range(len(sequence) - 1))


def _pll_loop(model, sequence: list[int], mask_id: int) -> float:
    """Each inner token masked in its own forward pass; its log-probability, in float64."""
    total = 0.0
    with torch.no_grad():
        for i in range(1, len(sequence) - 1):
            masked = list(sequence)
            masked[i] = mask_id
            logits = model.eval()(torch.tensor([masked]))[0, i].double()  # (V,)
            total += float(torch.log_softmax(logits, dim=-1)[sequence[i]])
    return total


def _independent(loaded, texts: list[str]) -> list[float]:
    sequences = _framed(loaded, texts)
    if loaded.config.arch == "decoder":
        return [_decoder_loop(loaded.model, s) for s in sequences]
    mask_id = special_tokens_of(tokenizer_from_json(loaded.tokenizer_json)).mask_id
    return [_pll_loop(loaded.model, s, mask_id) for s in sequences]


def _pair_file(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


# --------------------------------------------------------------------------- scores


def test_decoder_score_is_the_sum_of_log_probs_after_eos(tiny_checkpoints) -> None:
    loaded = load_checkpoint(tiny_checkpoints["decoder"])
    sequences = _framed(loaded, SENTENCES)
    eos = special_tokens_of(tokenizer_from_json(loaded.tokenizer_json)).eos_id
    assert all(s[0] == eos for s in sequences)  # scored as a document start
    expected = [_decoder_loop(loaded.model, s) for s in sequences]
    # All in one padded forward pass (sentences of different lengths), and each alone.
    batched = decoder_log_likelihoods(loaded.model, sequences)
    assert batched.dtype == torch.float64
    assert batched.tolist() == pytest.approx(expected, abs=1e-4)
    alone = decoder_log_likelihoods(loaded.model, sequences, max_tokens=1)
    assert alone.tolist() == pytest.approx(expected, abs=1e-4)


def test_encoder_pll_masks_one_token_at_a_time(tiny_checkpoints) -> None:
    loaded = load_checkpoint(tiny_checkpoints["encoder"])
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)
    specials = special_tokens_of(tokenizer)
    sequences = _framed(loaded, SENTENCES)
    assert all(s[0] == specials.cls_id and s[-1] == specials.sep_id for s in sequences)
    expected = [_pll_loop(loaded.model, s, specials.mask_id) for s in sequences]
    # The rows of every sentence in one padded forward pass, and each sentence's alone.
    packed = pseudo_log_likelihoods(loaded.model, sequences, specials.mask_id)
    assert packed.tolist() == pytest.approx(expected, abs=1e-4)
    alone = pseudo_log_likelihoods(loaded.model, sequences, specials.mask_id, max_tokens=1)
    assert alone.tolist() == pytest.approx(expected, abs=1e-4)


# --------------------------------------------------------------------------- accuracy


def test_ties_count_as_wrong_and_the_error_is_binomial() -> None:
    good = torch.tensor([1.0, 2.0, 3.0, -1.0], dtype=torch.float64)
    bad = torch.tensor([1.0, 1.0, 4.0, -2.0], dtype=torch.float64)
    result = pair_accuracy(good, bad)
    assert (result["n_pairs"], result["pair_acc"], result["ties"]) == (4, 0.5, 1)
    assert result["pair_acc_se"] == pytest.approx(math.sqrt(0.5 * 0.5 / 4))
    assert result["mean_margin"] == pytest.approx(0.25)


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_accuracy_per_paradigm_and_overall(tiny_checkpoints, tmp_path, arch) -> None:
    ckpt = tiny_checkpoints[arch]
    pairs = tmp_path / "pairs"
    pairs.mkdir()
    # BLiMP's UID names the paradigm; without one, the file's name does. An identical pair
    # is a tie: wrong by BLiMP's rule, whatever the model.
    _pair_file(
        pairs / "agreement.jsonl",
        [
            {"sentence_good": SENTENCES[0], "sentence_bad": SENTENCES[1], "UID": "first"},
            {"sentence_good": SENTENCES[2], "sentence_bad": SENTENCES[3], "UID": "first"},
            {"sentence_good": SENTENCES[3], "sentence_bad": SENTENCES[2]},
        ],
    )
    _pair_file(
        pairs / "same.jsonl",
        [{"sentence_good": SENTENCES[4], "sentence_bad": SENTENCES[4], "pairID": "0"}] * 2,
    )
    results = _evaluate(ckpt, f"pairs.path={pairs}", f"output_dir={tmp_path}")
    records = {r["paradigm"]: r for r in results["results"]}
    assert list(records) == ["agreement", "first", "same", "all"]
    s = _independent(load_checkpoint(ckpt), SENTENCES)
    firsts = [s[0] > s[1], s[2] > s[3]]
    assert records["first"]["n_pairs"] == 2
    assert records["first"]["pair_acc"] == sum(firsts) / 2
    assert records["agreement"]["pair_acc"] == float(s[3] > s[2])
    assert (records["same"]["pair_acc"], records["same"]["ties"]) == (0.0, 2)
    overall = (sum(firsts) + (s[3] > s[2])) / 5
    assert records["all"]["n_pairs"] == 5 and records["all"]["pair_acc"] == overall
    assert records["all"]["pair_acc_se"] == pytest.approx(math.sqrt(overall * (1 - overall) / 5))
    assert {r["pairs"] for r in records.values()} == {str(pairs.resolve())}
    assert {r["weights"] for r in records.values()} == {"trained"}


def test_builtin_pairs_are_fixed_swaps_and_replacements() -> None:
    pairs = builtin_pairs()
    assert pairs == builtin_pairs()  # seeded: the same set every time
    assert {p.paradigm for p in pairs} == {"adjacent_swap", "word_replace"}
    assert len(pairs) >= 200
    for pair in pairs:
        assert pair.good.endswith(".") and pair.bad.endswith(".")
        good, bad = pair.good[:-1].split(" "), pair.bad[:-1].split(" ")
        assert len(good) == len(bad) and good[0] == bad[0] and pair.good != pair.bad
        changed = [i for i, (a, b) in enumerate(zip(good, bad, strict=True)) if a != b]
        if pair.paradigm == "adjacent_swap":
            (i, j) = changed
            assert j == i + 1 and (good[i], good[j]) == (bad[j], bad[i])
        else:
            (i,) = changed
            assert len(good[i]) == len(bad[i])


# --------------------------------------------------------------------------- records


def test_records_say_what_was_scored_and_accumulate(tiny_checkpoints, tmp_path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(tiny_checkpoints["decoder"].parent.parent, run_dir)
    (run_dir / "eval.jsonl").unlink(missing_ok=True)
    out = f"output_dir={tmp_path}"
    pairs = _pair_file(
        tmp_path / "p.jsonl", [{"sentence_good": SENTENCES[0], "sentence_bad": SENTENCES[1]}]
    )
    _evaluate(run_dir, "pairs.path=builtin", out)
    _evaluate(run_dir, f"pairs.path={pairs}", out)
    _evaluate(run_dir, "eval.weights=untrained", "seed=2", out)  # pairs.path's default: builtin
    _evaluate(run_dir, "pairs.path=builtin", "eval.weights=untrained", "seed=3", out)
    _evaluate(run_dir, "pairs.path=builtin", out)  # again: replaces its own three records
    modes.eval.run(pairs_settings(run_dir, out, mode="eval"))  # text
    records = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    kinds = [(r.get("pairs"), r.get("paradigm"), r["weights"], r["weights_seed"]) for r in records]
    assert len(kinds) == len(set(kinds)) == 3 + 2 + 3 + 3 + 1
    assert kinds.count(("builtin", "all", "untrained", 2)) == 1
    assert kinds[-1] == (None, None, "trained", None) and "bpb" in records[-1]


def test_untrained_weights_are_fresh_weights_of_the_same_shape(tiny_checkpoints, tmp_path):
    ckpt = tiny_checkpoints["encoder"]
    trained = load_checkpoint(ckpt)
    untrained = load_checkpoint(ckpt)
    before = torch.random.get_rng_state()
    use_weights(untrained.model, "untrained", 2)
    assert torch.equal(torch.random.get_rng_state(), before)  # the global RNG is left alone
    torch.manual_seed(2)
    fresh = build_model(trained.config)
    ours, theirs = untrained.model.state_dict(), trained.model.state_dict()
    assert {k: v.shape for k, v in ours.items()} == {k: v.shape for k, v in theirs.items()}
    assert all(torch.equal(ours[k], v) for k, v in fresh.state_dict().items())
    assert not torch.equal(ours["embeddings.token.weight"], theirs["embeddings.token.weight"])
    # mode=eval scores that network: its accuracy and margin are the fresh network's.
    rows = [
        {"sentence_good": SENTENCES[i], "sentence_bad": SENTENCES[j]}
        for i in range(4)
        for j in range(i + 1, 4)
    ]
    pairs = _pair_file(tmp_path / "p.jsonl", rows)
    results = _evaluate(
        ckpt, f"pairs.path={pairs}", "eval.weights=untrained", "seed=2", f"output_dir={tmp_path}"
    )
    record = results["results"][-1]
    assert (record["weights"], record["weights_seed"]) == ("untrained", 2)
    margins = {}
    for name, loaded in (("untrained", untrained), ("trained", trained)):
        s = dict(zip(SENTENCES[:4], _independent(loaded, SENTENCES[:4]), strict=True))
        margins[name] = [s[r["sentence_good"]] - s[r["sentence_bad"]] for r in rows]
    assert record["pair_acc"] == sum(m > 0 for m in margins["untrained"]) / len(rows)
    assert record["mean_margin"] == pytest.approx(sum(margins["untrained"]) / len(rows), abs=1e-4)
    assert record["mean_margin"] != pytest.approx(sum(margins["trained"]) / len(rows), abs=1e-3)


def test_a_sweep_is_summarised_by_configuration(tiny_checkpoints, tmp_path) -> None:
    sweep = tmp_path / "sweep"
    for job, seed in enumerate(("1", "2")):
        run_dir = sweep / str(job)
        (run_dir / "checkpoints").mkdir(parents=True)
        shutil.copy(tiny_checkpoints["decoder"], run_dir / "checkpoints" / "best.ckpt")
        write_record(run_dir, {"status": "completed", "overrides": {"seed": seed}})
    results = _evaluate(sweep, "pairs.path=builtin", f"output_dir={tmp_path}")
    assert len(results["results"]) == 2 * 3
    table = results["configurations"]
    assert "pair_acc" in table.splitlines()[0] and "| 2 |" in table  # one configuration, n=2
    assert len((sweep / "eval.jsonl").read_text().splitlines()) == 6


def _pair_accuracy(ckpt: Path, pairs: list[dict[str, str]]) -> float:
    """The share of pairs whose good sentence scores strictly above its bad one."""
    loaded = load_checkpoint(ckpt)
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)

    def score(text: str) -> float:
        ids = frame_sentence(tokenizer, text, "decoder", WINDOW, "test")
        return _decoder_loop(loaded.model, ids)

    right = [score(p["sentence_good"]) > score(p["sentence_bad"]) for p in pairs]
    return sum(right) / len(right)


SWEEP_PAIRS = [
    {"sentence_good": good, "sentence_bad": bad, "UID": uid}
    for good, bad, uid in (
        ("the cat sat", "cat the sat", "order"),
        ("a dog ran", "dog a ran", "order"),
        ("it is red", "it are red", "agreement"),
        ("they are here", "they is here", "agreement"),
        ("we were there", "we was there", "agreement"),
        ("she has it", "she have it", "agreement"),
    )
]


def test_pairs_over_a_sweep_are_grouped_by_their_accuracy_over_every_pair(
    tmp_path: Path,
) -> None:
    """Two configurations (different networks, tests/evaluation_helpers.py's untrained tiny
    decoders): a record per paradigm and one over every pair each, and the sweep's table of
    the overall accuracy, the higher the better."""
    base = untrained_checkpoint(tmp_path / "base.ckpt", "decoder", make_paragraphs(6))
    sweep = tmp_path / "sweep"
    accuracy = {}
    for job, (dropout, seed) in enumerate((("0.0", 1), ("0.1", 2))):
        ckpt = with_weights_drawn_from(base, seed, sweep / str(job) / "checkpoints" / "best.ckpt")
        write_record(ckpt.parent.parent, {"overrides": {"model.dropout": dropout}})
        accuracy[dropout] = _pair_accuracy(ckpt, SWEEP_PAIRS)
    assert accuracy["0.0"] != accuracy["0.1"]  # so the table has a best
    pairs = _pair_file(tmp_path / "pairs.jsonl", SWEEP_PAIRS)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = _evaluate(sweep, f"pairs.path={pairs}", f"output_dir={tmp_path}")
    printed = out.getvalue().splitlines()
    records = result["results"]
    assert [(r["checkpoint"].split("/")[-3], r["paradigm"], r["n_pairs"]) for r in records] == [
        (job, paradigm, n)
        for job in ("0", "1")
        for paradigm, n in (("agreement", 4), ("order", 2), ("all", 6))
    ]
    overall = [r["pair_acc"] for r in records if r["paradigm"] == "all"]
    assert overall == pytest.approx([accuracy["0.0"], accuracy["0.1"]])
    assert printed[0] == "| " + " | ".join(features.pairs.command.COLUMNS) + " |"
    table = result["configurations"].splitlines()
    assert table[0].startswith("| model.dropout | n | failed | pair_acc | vs_best |")
    best, other = sorted(accuracy, key=accuracy.__getitem__, reverse=True)
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in table[2:]}
    assert rows[best].startswith(f"| {best} | 1 | 0 | {accuracy[best]:.4f} | best |")
    behind = accuracy[other] - accuracy[best]
    assert rows[other].startswith(f"| {other} | 1 | 0 | {accuracy[other]:.4f} | {behind:.4f} |")
    written = [json.loads(line) for line in (sweep / "eval.jsonl").read_text().splitlines()]
    assert written == records


def test_pair_records_keep_the_identity_mode_eval_gave_them() -> None:
    """Records written when mode=eval scored pairs are replaced by a re-run of mode=pairs (it
    writes them with mode=eval's identity), with the same defaults for records from before
    weights and precision were named; text records never share one with a pair record."""
    old = {"checkpoint": "run/checkpoints/best.ckpt", "pairs": "builtin", "paradigm": "all"}
    old["pairs_fingerprint"] = "f" * 16
    new = {**old, "weights": "trained", "weights_seed": None, "precision": "32-true"}
    identity = modes.eval.record_identity
    assert identity(old) == identity(new)
    assert identity({**old, "weights": "untrained", "weights_seed": 2}) != identity(new)
    assert identity({**old, "paradigm": "order"}) != identity(new)
    text = {"checkpoint": old["checkpoint"], "data": "held.txt", "split": "all"}
    assert identity(text) != identity(new)


def test_mode_pairs_reads_its_checkpoint_once(tiny_checkpoints, tmp_path, monkeypatch) -> None:
    assert checkpoint_reads(tiny_checkpoints["decoder"], tmp_path, monkeypatch, "pairs")


def test_the_best_accuracy_is_the_highest() -> None:
    runs = [
        {"status": "completed", "pair_acc": acc, "overrides": {"x": x, "seed": str(seed)}}
        for x, accs in (("a", (0.80, 0.82, 0.81)), ("b", (0.60, 0.61, 0.62)))
        for seed, acc in enumerate(accs)
    ]
    configs = group_runs(runs, ["x"], metric="pair_acc", higher_is_better=True)
    rows = configuration_rows(configs, ())
    assert [r["is_best"] for r in rows] == [True, False]
    assert rows[1]["vs_best"] == pytest.approx(-0.2) and rows[1]["exceeds_2se"] is True
    assert "-0.2000 (> 2 SE)" in configuration_table(configs, rows)


# --------------------------------------------------------------------------- bad input

BAD_PAIRS = [
    (
        '{"good": "a", "bad": "b"}\n',
        r"line 1 has no sentence_good or sentence_bad \(its fields: good, bad\)",
    ),
    ('{"sentence_good": "The class.", "sentence_bad": "  "}\n', r"line 1: sentence_bad is empty"),
    (
        '{"sentence_good": "A b.", "sentence_bad": "B a."}\n\n{"sentence_good": "x"}\n',
        r"line 3 has no sentence_bad \(its fields: sentence_good\)",
    ),
    ("not json\n", r"line 1 is not JSON"),
    ("", r"holds no pairs"),
    (
        '{"sentence_good": "' + "word " * 80 + '", "sentence_bad": "a b."}\n',
        r"line 1: a sentence of \d+ tokens is longer than the checkpoint's context \(64 tokens "
        r"with max_seq_len=64\); minimal pairs are scored whole, never cut or in windows",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_PAIRS)
def test_bad_pair_files_are_one_line(tiny_checkpoints, tmp_path, text, message) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(ValueError, match=message) as err:
        _evaluate(tiny_checkpoints["decoder"], f"pairs.path={path}", f"output_dir={tmp_path}")
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_missing_pairs_and_conflicting_settings(tiny_checkpoints, tmp_path) -> None:
    ckpt, out = tiny_checkpoints["encoder"], f"output_dir={tmp_path}"
    with pytest.raises(FileNotFoundError, match=r"pairs.path=.*nothere.jsonl does not exist"):
        _evaluate(ckpt, f"pairs.path={tmp_path / 'nothere.jsonl'}", out)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"is a directory without .jsonl files"):
        _evaluate(ckpt, f"pairs.path={tmp_path / 'empty'}", out)
    with pytest.raises(ValueError, match=r"data.path is for text; mode=pairs scores"):
        _evaluate(ckpt, "pairs.path=builtin", "data.path=x.txt", out)
    with pytest.raises(ValueError, match=r"eval.stride=8 is for text \(mode=eval\); minimal pairs"):
        _evaluate(ckpt, "eval.stride=8", out)
    with pytest.raises(ValueError, match=r"pairs.path is empty; pass a BLiMP-format"):
        PairsConfig(path=" ")
    with pytest.raises(ValueError, match=r"^pairs.path is for mode=pairs .*mode=eval does not"):
        pairs_settings(ckpt, "pairs.path=builtin2", out, mode="eval")
    if "heads" in feature_groups():  # its heads.prune gates heads off for mode=eval's text
        with pytest.raises(ValueError, match=r"heads.prune is for mode=eval .*mode=pairs does"):
            pairs_settings(ckpt, "heads.prune=0.5", out)


def test_train_py_says_a_bad_pair_file_in_one_line(tiny_checkpoints, tmp_path) -> None:
    path = _pair_file(tmp_path / "bad.jsonl", [{"text": "a"}])
    proc = train_py(
        "mode=pairs",
        f"ckpt_path={tiny_checkpoints['decoder']}",
        f"pairs.path={path}",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "line 1 has no sentence_good or sentence_bad (its fields: text)" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


def test_the_old_command_names_the_new_one_in_one_line(tiny_checkpoints, tmp_path) -> None:
    proc = train_py(
        "mode=eval",
        f"ckpt_path={tiny_checkpoints['decoder']}",
        "eval.pairs=builtin",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    (line,) = proc.stderr.splitlines()
    assert line.startswith(
        "tinylm: error: unknown key(s) eval.pairs (retired: use mode=pairs "
        "pairs.path=builtin|FILE|DIR); valid keys: "
    )


def test_read_pairs_fingerprints_the_contents(tmp_path) -> None:
    path = _pair_file(tmp_path / "p.jsonl", [{"sentence_good": "A b.", "sentence_bad": "B a."}])
    first = read_pairs(str(path))
    assert first.paradigms == ["p"] and first.name == str(path.resolve())
    _pair_file(path, [{"sentence_good": "A b.", "sentence_bad": "B b."}])
    assert read_pairs(str(path)).fingerprint != first.fingerprint
