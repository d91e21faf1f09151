"""Reading tinylm checkpoints safely, holding settings against them, exporting their weights.

A checkpoint holds plain types only, so it loads with ``torch.load(weights_only=True)``: a
file that needs pickled code to load is refused, never executed.
"""

from __future__ import annotations

import codecs
import json
import pickle
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from conf.features import checkpoint_owner, hook, is_language_model
from conf.schema import OptimConfig, Settings
from models.config import ModelConfig
from models.transformer import build_model

_REQUIRED_HPARAMS = ("model_config", "tokenizer_json")
_SNIFF_BYTES = 4096  # enough to tell what a file that is not a checkpoint looks like
_ZIP_MAGIC = b"PK\x03\x04"
_PICKLE_PROTOCOLS = (b"\x02", b"\x03", b"\x04", b"\x05")  # torch's legacy format: protocol 2


@dataclass
class LoadedCheckpoint:
    path: Path
    model: nn.Module
    config: ModelConfig
    hparams: dict[str, Any]
    global_step: int

    @property
    def tokenizer_json(self) -> str:
        return self.hparams["tokenizer_json"]


def read_checkpoint(path: str | Path) -> dict[str, Any]:
    """``torch.load(weights_only=True)`` with errors that say what is wrong with the file."""
    path = Path(path)
    if path.is_dir():
        check_not_hf_export(path)
        raise IsADirectoryError(
            f"{path} is a directory; pass a checkpoint file such as "
            f"{path}/checkpoints/best.ckpt or {path}/checkpoints/last.ckpt"
        )
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} does not exist")
    _check_torch_file(path)
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise ValueError(
            f"refusing to load {path}: it contains pickled Python objects that would run "
            "arbitrary code when loaded (torch.load weights_only=True rejected it). tinylm "
            "checkpoints hold plain types only; load it only if you trust its source and "
            f"re-save its state_dict. Detail: {str(err).splitlines()[0]}"
        ) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile) as err:
        raise _damaged(path, err) from None
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise ValueError(f"{path} is not a tinylm checkpoint (no state_dict in it)")
    hparams = checkpoint.get("hyper_parameters") or {}
    missing = [k for k in _REQUIRED_HPARAMS if k not in hparams]
    if missing:
        raise ValueError(
            f"{path} is not a tinylm checkpoint: its hyper_parameters lack {', '.join(missing)}"
        )
    return checkpoint


def check_not_hf_export(folder: Path) -> None:
    """Refuse a Hugging Face folder (``export.format=hf``'s) given as ``ckpt_path``, by name."""
    if (folder / "config.json").is_file() and (folder / "model.safetensors").is_file():
        raise ValueError(
            f"{folder} is a Hugging Face export folder (config.json, model.safetensors), not a "
            "checkpoint: load it with transformers' from_pretrained, or pass the .ckpt it was "
            f"exported from, {_checkpoint_near(folder)}"
        )


def _check_torch_file(path: Path) -> None:
    """Name a file that is neither torch.save's zip archive nor a pickle by what it looks like:
    torch.load would call random bytes a pickle that needs code."""
    with open(path, "rb") as f:
        head = f.read(_SNIFF_BYTES)
    if head.startswith(_ZIP_MAGIC):
        _check_torch_archive(path)
        return
    if head[:1] == b"\x80" and head[1:2] in _PICKLE_PROTOCOLS:
        return  # torch.load(weights_only=True) says whether it needs code
    header = int.from_bytes(head[:8], "little")  # safetensors: header size, then JSON
    if head[8:9] == b"{" and 0 < header <= path.stat().st_size - 8:
        raise ValueError(
            f"{path} is a safetensors file (weights only, as mode=export writes them), not a "
            f"checkpoint: pass the .ckpt it was exported from, {_checkpoint_near(path)}"
        )
    raise ValueError(f"{path} {_looks_like(path, head)}; pass {_checkpoint_near(path)}")


def _check_torch_archive(path: Path) -> None:
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except zipfile.BadZipFile as err:
        raise _damaged(path, err) from None
    if not any(name == "data.pkl" or name.endswith("/data.pkl") for name in names):
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "")
        raise ValueError(
            f"{path} is a zip archive of other files ({shown or 'none'}), not a checkpoint "
            f"(torch.save writes a data.pkl in it); pass {_checkpoint_near(path)}"
        )


def _looks_like(path: Path, head: bytes) -> str:
    """What a file is, as the rest of a sentence that starts with its name."""
    if not head:
        return "is empty (0 bytes), not a checkpoint (a crash while saving can leave one)"
    try:
        text = codecs.getincrementaldecoder("utf-8")().decode(head)  # may end mid-character
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        return (
            f"is not a checkpoint: it holds binary data of no known kind (it starts with bytes "
            f"{head[:8].hex(' ')}), not the zip archive torch.save writes nor a pickle"
        )
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"is {_text_kind(path, text)}, not a checkpoint (it starts with {first[:40]!r})"


def _text_kind(path: Path, text: str) -> str:
    if '"added_tokens"' in text:
        return "a tokenizer (tokenizer.json, JSON text)"
    if text.lstrip()[:1] in ("{", "["):
        return "a JSON text file"
    if path.suffix in (".yaml", ".yml"):
        return "a YAML text file"
    return "a text file"


def _checkpoint_near(path: Path) -> str:
    """The checkpoint ``path`` was exported from (X.ckpt for X.safetensors or X-hf/), else one
    beside it or in checkpoints/ beside it, else the usual place of one."""
    source = path.with_name(f"{path.stem.removesuffix('-hf')}.ckpt")
    found = sorted({*path.parent.glob("*.ckpt"), *path.parent.glob("checkpoints/*.ckpt")})
    near = [p for p in [source, *found] if p.is_file() and p != path]
    return f"a checkpoint file such as {near[0] if near else 'RUN/checkpoints/best.ckpt'}"


def _damaged(path: Path, err: Exception) -> ValueError:
    detail = str(err).splitlines()[0] if str(err) else "empty"
    return ValueError(
        f"cannot read checkpoint {path}: it is truncated or damaged ({type(err).__name__}: "
        f"{detail}). Use another checkpoint of the run, e.g. last.ckpt or best.ckpt."
    )


def check_language_model(path: str | Path, hparams: dict[str, Any], mode: str | None) -> None:
    """Refuse a checkpoint that is no pretrained language model (a feature's), in one line."""
    if is_language_model(hparams):
        return
    owner = checkpoint_owner(hparams)
    if owner is not None and owner.describe_checkpoint:
        raise ValueError(hook(owner.describe_checkpoint)(path, hparams, mode))
    raise ValueError(
        f"{path} is not a language model's checkpoint; {f'mode={mode}' if mode else 'this'} "
        "needs a pretrained checkpoint (python train.py writes one)"
    )


def load_checkpoint(
    path: str | Path, mode: str | None = None, checkpoint: dict[str, Any] | None = None
) -> LoadedCheckpoint:
    """Rebuild the network of a language-model checkpoint, in eval mode on the CPU
    (``checkpoint``: its contents, when the caller has read them already)."""
    checkpoint = checkpoint or read_checkpoint(path)
    hparams = checkpoint["hyper_parameters"]
    check_language_model(path, hparams, mode)
    config = ModelConfig.from_dict(hparams["model_config"])
    check_tokenizer_fits(hparams["tokenizer_json"], config, path)
    model = build_model(config)
    weights = {
        key.removeprefix("model."): value
        for key, value in checkpoint["state_dict"].items()
        if key.startswith("model.")
    }
    try:
        model.load_state_dict(weights)
    except RuntimeError as err:
        raise ValueError(
            f"{path}: the weights do not fit the model config stored in it ({err})"
        ) from None
    return loaded_checkpoint(path, model, config, hparams, checkpoint)


def loaded_checkpoint(
    path: str | Path,
    model: nn.Module,
    config: ModelConfig,
    hparams: dict[str, Any],
    checkpoint: dict[str, Any],
) -> LoadedCheckpoint:
    """A rebuilt ``model``, in eval mode, with what was read beside it."""
    return LoadedCheckpoint(
        path=Path(path),
        model=model.eval(),
        config=config,
        hparams=dict(hparams),
        global_step=int(checkpoint.get("global_step", 0)),
    )


def use_weights(model: nn.Module, weights: str, seed: int) -> None:
    """``eval.weights=untrained``: replace the weights by those a fresh network draws from
    ``seed`` (the baseline a trained model must beat), the global random state left as it was."""
    if weights == "trained":
        return
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        fresh = build_model(model.config)
    model.load_state_dict(fresh.state_dict())


def check_tokenizer_fits(tokenizer_json: str, config: ModelConfig, where: Any) -> None:
    """The tokenizer's vocabulary must be the model's: otherwise ids index the wrong rows."""
    try:
        tokenizer = json.loads(tokenizer_json)
        vocab = tokenizer["model"]["vocab"]
        added = {t["id"] for t in tokenizer.get("added_tokens") or []}
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{where}: its tokenizer is not a valid tokenizer.json ({err})") from None
    ids = set(vocab.values() if isinstance(vocab, dict) else range(len(vocab))) | added
    size = max(ids) + 1 if ids else 0
    if size != config.vocab_size:
        raise ValueError(
            f"{where}: the tokenizer has {size} tokens but the model's vocab_size is "
            f"{config.vocab_size}; the tokenizer does not belong to these weights. Use the "
            "tokenizer.json of the run that produced the checkpoint"
        )


def check_output_free(out: Path, overwrite: bool) -> None:
    """Refuse an existing export output unless ``export.overwrite=true``."""
    if out.exists() and not overwrite:
        raise FileExistsError(
            f"{out} already exists; pass export.overwrite=true to replace it, or "
            "export.path=ANOTHER to write elsewhere"
        )


def export_safetensors(loaded: LoadedCheckpoint, out_path: str | Path) -> Path:
    """Write a checkpoint's network weights as ``safetensors`` (the configs go in metadata)."""
    from safetensors.torch import save_model

    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)  # export.path=new/dir/NAME.safetensors
    metadata = {
        "model_config": json.dumps(loaded.config.to_dict()),
        "tokenizer_json": loaded.tokenizer_json,
    }
    # save_model, unlike save_file, handles the tied embedding/head weights.
    save_model(loaded.model, str(out_path), metadata=metadata)
    return out_path


def load_safetensors(path: str | Path) -> tuple[nn.Module, str]:
    """Rebuild the network written by ``export_safetensors``; returns (model, tokenizer_json)."""
    from safetensors import safe_open
    from safetensors.torch import load_model

    with safe_open(str(path), framework="pt") as f:
        metadata = f.metadata() or {}
    if "model_config" not in metadata:
        raise ValueError(f"{path} has no tinylm model_config in its metadata")
    config = ModelConfig.from_dict(json.loads(metadata["model_config"]))
    model = build_model(config)
    load_model(model, str(path))
    return model.eval(), metadata.get("tokenizer_json", "")


# ------------------------------------------------------ settings held against a checkpoint


def check_resume(
    ckpt: str | Path, trained: dict[str, Any], model: ModelConfig, optim: OptimConfig
) -> list[str]:
    """Resuming needs the checkpoint's model and optimiser kind: name every setting that
    differs, in one line, before any data (``trained``: its ``hyper_parameters``). The other
    optimiser settings may change on resuming (a lower rate, say); those that do are returned,
    each as ``optim.KEY=NEW (checkpoint: OLD)``, for the caller to say so."""
    # The fields a checkpoint predates hold their defaults.
    trained_model = ModelConfig.from_dict(trained["model_config"]).to_dict()
    if trained_model.get("arch") != model.arch:

        def named(arch: str) -> str:
            return "a decoder (model=gpt)" if arch == "decoder" else "an encoder (model=bert)"

        raise ValueError(
            f"ckpt_path={ckpt} holds {named(trained_model['arch'])} but the model config builds "
            f"{named(model.arch)}; resume with the checkpoint's model, or start a new "
            "run without ckpt_path"
        )
    filled = ("vocab_size", "pad_token_id")  # the tokenizer decides these
    differ = [
        f"model.{k}={v} (checkpoint: {trained_model.get(k)})"
        for k, v in model.to_dict().items()
        if k not in filled and trained_model.get(k) != v
    ]
    kind = trained.get("optim_config", {}).get("kind", "adamw")  # older checkpoints: AdamW
    if kind != optim.kind:
        differ.append(f"optim={optim.kind} (checkpoint: {kind}, whose optimiser state it holds)")
    if differ:
        raise ValueError(
            f"ckpt_path={ckpt} was trained with other settings: {', '.join(differ)}. Resume "
            "with the checkpoint's values, or start a new run without ckpt_path"
        )
    # Built as its task is loaded: the fields it predates hold their defaults (no warm-up).
    then = asdict(OptimConfig(**trained.get("optim_config", asdict(optim))))
    changed = {k: v for k, v in asdict(optim).items() if then[k] != v}
    return [f"optim.{k}={v} (checkpoint: {then[k]})" for k, v in changed.items()]


def check_no_model_overrides(settings: Settings, trained: dict[str, Any], ckpt: str | Path) -> None:
    """The modes that take the model from the checkpoint refuse a model.* (or model=) on the
    command line, which they would ignore (``trained``: the checkpoint's model config)."""
    asked = [k for k in settings.overrides if k == "model" or k.startswith("model.")]
    if not asked:
        return
    requested = settings.model.to_dict()
    mode = settings.job.mode
    table = trained["max_seq_len"]
    if "model.max_seq_len" in asked and requested["max_seq_len"] > table:
        raise ValueError(
            f"model.max_seq_len={requested['max_seq_len']} is larger than the position "
            f"table of {ckpt} ({table} positions); mode={mode} uses the checkpoint's model: "
            f"drop model.max_seq_len (generation slides a window of {table} tokens over longer "
            "texts)"
        )
    keys = {k: "arch" if k == "model" else k.removeprefix("model.") for k in asked}
    differ = [k for k, key in keys.items() if requested.get(key) != trained.get(key)]
    if differ:
        raise ValueError(
            f"mode={mode} takes the model config from the checkpoint {ckpt}, which differs from "
            f"{', '.join(differ)} on the command line: drop them (to train another model, use "
            "mode=train)"
        )
