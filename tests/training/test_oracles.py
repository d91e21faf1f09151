"""Metrics and training settings checked against computations written here from their
definitions, never with the application's own functions: bits per character and accuracy
recounted from the logits, the learning-rate schedule read back from a real run's log, and
the weight-decay groups by parameter name.
"""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from tokenizers import Tokenizer
from torch import nn

from conf.schema import OptimConfig
from data.config import DataConfig
from data.corpus import Corpus
from tests.conftest import ROOT, TINY
from tests.tiny_models import tiny_config
from train import run
from training.checkpoint import load_checkpoint
from training.task import task_class

LR, WARMUP, MIN_RATIO, MAX_STEPS = 3e-3, 5, 0.25, 30


@pytest.fixture(scope="module")
def logged_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """A tiny decoder run that logs every step and validates on the whole validation split.
    Read only: tests that write beside its checkpoints copy them first."""
    from hydra import compose, initialize_config_dir

    out = tmp_path_factory.mktemp("oracle") / "run"
    overrides = [
        *TINY,
        "logger=csv",
        "trainer.log_every_n_steps=1",
        "trainer.limit_val_batches=1.0",
        f"trainer.max_steps={MAX_STEPS}",
        "optim=adamw",  # the schedule's oracle below reads AdamW's two groups
        f"optim.lr={LR}",
        f"optim.warmup_steps={WARMUP}",
        f"optim.min_lr_ratio={MIN_RATIO}",
        f"output_dir={out}",
    ]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    return out, run(cfg)


def _recount(ckpt: Path, texts: list[str], overlap: int) -> dict[str, float]:
    """Bits per character and next-token accuracy of ``ckpt`` over ``texts``, from the text
    and the model's logits.

    The texts are encoded one by one and joined into one stream with an end-of-text token
    after each (that token stands for the one separator character between them). Windows of
    max_seq_len + 1 tokens are cut from it, each starting ``max_seq_len + 1 - overlap``
    tokens after the previous one, and score their max_seq_len targets given the tokens
    before them; a tail that fills no window is not scored. ``overlap=0``: the blocks
    training validates on; ``overlap=1``: mode=eval's windows, where each window's first
    input is the previous one's last target, so every target from the second token on is
    scored. Bits per character: the mean -log2 p of the scored tokens, times the tokens of
    the whole stream (what the scored tokens are a sample of), over the characters.
    """
    loaded = load_checkpoint(ckpt)
    tokenizer = Tokenizer.from_str(loaded.tokenizer_json)
    eos = tokenizer.token_to_id("<|endoftext|>")
    stream: list[int] = []
    for text in texts:
        stream += [*tokenizer.encode(text, add_special_tokens=False).ids, eos]
    characters = sum(len(text) for text in texts) + len(texts)  # + one separator each

    length = loaded.config.max_seq_len + 1
    step = length - overlap
    starts = range(0, len(stream) - length + 1, step)
    windows = torch.tensor([stream[start : start + length] for start in starts])
    bits, correct = 0.0, 0
    with torch.inference_mode():
        for chunk in windows.split(64):
            inputs, targets = chunk[:, :-1], chunk[:, 1:]
            logits = loaded.model(inputs).double()
            log_p = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1))
            bits -= log_p.sum().item() / math.log(2)
            correct += int((logits.argmax(-1) == targets).sum())
    scored = windows.shape[0] * (length - 1)
    return {"bpc": bits / scored * len(stream) / characters, "acc": correct / scored}


def _validation_texts(ckpt: Path) -> list[str]:
    data = DataConfig(**load_checkpoint(ckpt).hparams["data_config"])
    return [text for batch in Corpus(data).texts("validation") for text in batch]


def test_bpc_and_accuracy_match_a_recount_from_the_logits(
    logged_run: tuple[Path, dict], make_cfg, tmp_path: Path
) -> None:
    out, metrics = logged_run
    # A copy: mode=eval writes its record beside the checkpoint it scores.
    ckpt = tmp_path / "last.ckpt"
    shutil.copy(out / "checkpoints" / "last.ckpt", ckpt)
    texts = _validation_texts(ckpt)
    # The last validation of training scored the same weights (last.ckpt) on the same split.
    blocks = _recount(ckpt, texts, overlap=0)
    assert 0 < blocks["acc"] < 1 and blocks["bpc"] > 0
    assert metrics["step"] == MAX_STEPS
    # float32 logits and a running mean over batches against a float64 sum: 1e-5 apart.
    assert metrics["val_bpc"] == pytest.approx(blocks["bpc"], rel=1e-5)
    assert metrics["val_acc"] == pytest.approx(blocks["acc"], rel=1e-6)

    evaluated = run(make_cfg("mode=eval", f"ckpt_path={ckpt}"))["results"][0]
    windows = _recount(ckpt, texts, overlap=1)
    assert evaluated["bpc"] == pytest.approx(windows["bpc"], rel=1e-5)
    assert evaluated["acc"] == pytest.approx(windows["acc"], rel=1e-6)


def test_eval_of_a_run_dir_on_other_data_counts_that_datas_characters(
    logged_run: tuple[Path, dict], make_cfg, tmp_path: Path
) -> None:
    """``ckpt_path=RUN_DIR`` scores its best checkpoint; ``data=text data.path=FILE`` scores
    all of the file, tokenized by the checkpoint's tokenizer, and bits per character count
    that text's characters. Through train.py: Hydra records the command line's data
    overrides there (compose() records none)."""
    from tests.conftest import train_py

    run_dir = Path(shutil.copytree(logged_run[0], tmp_path / "run"))  # eval.jsonl lands here
    text = tmp_path / "other.txt"  # text the model was not trained on
    text.write_text((ROOT / "README.md").read_text())
    other = ["data=text", f"data.path={text}"]
    proc = train_py(
        "mode=eval",
        f"ckpt_path={run_dir}",
        *other,
        "trainer.precision=32-true",  # the recount is float32
        f"hydra.run.dir={tmp_path}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    assert row["checkpoint"] == str(run_dir / "checkpoints" / "best.ckpt")
    data = DataConfig(**OmegaConf.to_container(make_cfg(*other).data, resolve=True))
    texts = [text for batch in Corpus(data, whole=True).texts(data.split) for text in batch]
    expected = _recount(run_dir / "checkpoints" / "best.ckpt", texts, overlap=1)
    assert row["characters"] == sum(len(t) for t in texts) + len(texts)
    assert row["bpc"] == pytest.approx(expected["bpc"], rel=1e-5)
    assert row["acc"] == pytest.approx(expected["acc"], rel=1e-6)


def _expected_lr(step: int) -> float:
    """Linear warmup then cosine decay, from their definition: the rate rises in equal
    increments from LR / (WARMUP + 1) at step 0 to LR at step WARMUP, then follows half a
    cosine from LR at step WARMUP down to LR * MIN_RATIO at step MAX_STEPS."""
    if step <= WARMUP:
        return LR * (step + 1) / (WARMUP + 1)
    angle = math.pi * (step - WARMUP) / (MAX_STEPS - WARMUP)
    return LR * (MIN_RATIO + (1 - MIN_RATIO) * (1 + math.cos(angle)) / 2)


def test_logged_learning_rates_follow_warmup_then_cosine(logged_run: tuple[Path, dict]) -> None:
    out, _ = logged_run
    with open(out / "csv" / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r["lr-AdamW/pg1"]]
    # One column per parameter group (with and without weight decay): one schedule for both.
    logged = {int(r["step"]): (float(r["lr-AdamW/pg1"]), float(r["lr-AdamW/pg2"])) for r in rows}
    # The rate each optimiser step used, logged before the step; every step is logged.
    assert sorted(logged) == list(range(MAX_STEPS)) and len(rows) == MAX_STEPS
    for step, rates in logged.items():
        assert rates == pytest.approx((_expected_lr(step),) * 2, rel=1e-9), step
    assert max(max(rates) for rates in logged.values()) == pytest.approx(LR)


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_weight_decay_applies_to_linear_and_embedding_matrices_only(arch: str) -> None:
    config = tiny_config(arch, type_vocab_size=2 if arch == "encoder" else 0)
    optim = OptimConfig(
        lr=1e-3, weight_decay=0.1, beta1=0.9, beta2=0.95, warmup_steps=1, min_lr_ratio=0.1
    )
    task = task_class(arch)(
        model_config=config,
        optim_config=optim,
        tokenizer_json="{}",
        data_config=DataConfig(),
        chars_per_token={},
        total_steps=10,
    )
    # By module: the weight of a Linear or an Embedding decays; biases, LayerNorm weights and
    # anything else do not. By id, then named: a tied head shares the embedding's tensor.
    names = {id(p): name for name, p in task.named_parameters()}
    should_decay = {
        names[id(module.weight)]
        for module in task.modules()
        if isinstance(module, nn.Linear | nn.Embedding)
    }
    optimizer = task.configure_optimizers()["optimizer"]
    by_decay: dict[float, set[str]] = {}
    for group in optimizer.param_groups:
        by_decay.setdefault(group["weight_decay"], set()).update(
            names[id(p)] for p in group["params"]
        )
    decayed, not_decayed = by_decay.get(0.1, set()), by_decay.get(0.0, set())
    assert decayed == should_decay
    assert not_decayed == set(names.values()) - should_decay
    assert set(by_decay) == {0.0, 0.1}
    # The names say the same: the token embedding, the attention and MLP projections decay.
    assert "model.embeddings.token.weight" in decayed
    assert any(n.endswith("attn.qkv_proj.weight") for n in decayed)
    assert not any(n.endswith(".bias") or "norm" in n for n in decayed)


def test_encoder_loss_and_masked_accuracy_match_a_recount_from_the_logits(
    tiny_checkpoints, tmp_path: Path
) -> None:
    """The encoder's validation loss and masked-token accuracy through ``mode=eval``, against
    float64 sums over the masked positions of the very batches it scores (the data's labels:
    IGNORE_INDEX everywhere but the masked tokens), divided by the masked tokens alone."""
    from hydra import compose, initialize_config_dir

    from conf.hydra_runtime import parse_settings
    from data.collate import IGNORE_INDEX
    from data.evaluation import data_to_evaluate

    ckpt = tmp_path / "last.ckpt"
    shutil.copy(tiny_checkpoints["encoder"], ckpt)
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[
                *("logger=none", "mode=eval", f"ckpt_path={ckpt}", f"output_dir={tmp_path}"),
                "trainer.precision=32-true",  # the recount from the logits is float32
            ],
        )
    evaluated = run(cfg)["results"][0]

    settings = parse_settings(cfg)
    loaded = load_checkpoint(ckpt)
    trained = DataConfig(**loaded.hparams["data_config"])
    datamodule, _ = data_to_evaluate(trained, settings.data, settings.overrides).prepare(
        "encoder",
        loaded.config.max_seq_len,
        seed=settings.job.seed,
        tokenizer_json=loaded.tokenizer_json,
        stride=None,
    )
    nats, correct, masked, positions = 0.0, 0, 0, 0
    with torch.inference_mode():
        for batch in datamodule.val_dataloader():
            logits = loaded.model(batch["input_ids"], batch["attention_mask"]).double()
            where = batch["labels"] != IGNORE_INDEX  # (B, T): the masked tokens
            targets = batch["labels"][where]
            log_p = torch.log_softmax(logits[where], dim=-1)
            nats -= log_p.gather(-1, targets.unsqueeze(-1)).sum().item()
            correct += int((logits[where].argmax(-1) == targets).sum())
            masked += int(where.sum())
            positions += where.numel()
    assert 0 < masked < positions / 4  # about mlm_probability of the tokens, not all of them
    assert evaluated["tokens_scored"] == masked
    assert evaluated["loss"] == pytest.approx(nats / masked, rel=1e-5)
    assert evaluated["acc"] == pytest.approx(correct / masked, rel=1e-6)
