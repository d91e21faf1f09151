"""The libraries' private names: each one tinylm uses, pinned where it is used
(``common/library_private.py``), and nowhere else in the product code.

A library may change a private name in any release, without a deprecation. The first half pins
the behaviour each adapter function relies on, so that an upgrade that breaks one fails here,
under the function's name. The second half reads every product module (all but ``tests/``,
``bench/``, ``docs/`` and what tools write beside them) and fails on a private name of a
library anywhere outside the adapter module.
"""

from __future__ import annotations

import ast
import os
import shutil
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from common import library_private as private
from tests.conftest import ROOT

# --------------------------------------------------------------------------- the adapters


def test_importing_the_adapter_module_loads_none_of_its_libraries() -> None:
    """Its libraries are imported inside its functions: the modules that import it (the
    command-line check, the Lightning layer) load only what they loaded before."""
    import subprocess

    code = (
        "import sys; import common.library_private; "
        "print(sorted({m.partition('.')[0] for m in sys.modules} & "
        "{'hydra', 'lightning', 'torch', 'datasets', 'wandb', 'optuna'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"


def test_hydra_argument_parser_is_the_one_hydra_main_parses_with() -> None:
    import hydra._internal.utils

    # hydra.main reads sys.argv with this very function (the module, not the decorator).
    assert sys.modules["hydra.main"].get_args_parser is hydra._internal.utils.get_args_parser
    args = private.hydra_argument_parser().parse_args(
        ["-m", "--config-dir", "extra", "model=gpt", "trainer.max_steps=3"]
    )
    assert args.multirun and args.config_dir == "extra" and args.config_path is None
    assert args.overrides == ["model=gpt", "trainer.max_steps=3"]
    # What conf.command_line reads besides the overrides.
    assert args.shell_completion is False and args.experimental_rerun is None


def _tiny_fit(callback: Any, max_steps: int = 6) -> Any:
    """A Trainer that fits a linear layer on random batches, with ``callback``."""
    import lightning as L
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    class Linear(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            return self.layer(batch[0]).pow(2).mean()

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = DataLoader(TensorDataset(torch.randn(32, 4)), batch_size=4)
    trainer = L.Trainer(
        max_steps=max_steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[callback],
    )
    return trainer, lambda: trainer.fit(Linear(), data)


def test_mark_sigterm_received_stops_the_fit_with_lightnings_sigterm_exception() -> None:
    import lightning as L
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    class AtSecondBatch(L.Callback):
        exception: BaseException | None = None

        def on_train_batch_end(self, trainer: L.Trainer, *args: Any) -> None:
            if trainer.global_step == 2:
                assert not trainer.received_sigterm
                private.mark_sigterm_received(trainer)
                assert trainer.received_sigterm  # the public property reads the flag

        def on_exception(self, trainer: L.Trainer, module: Any, exception: BaseException):
            self.exception = exception

    callback = AtSecondBatch()
    trainer, fit = _tiny_fit(callback)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        with pytest.raises(SIGTERMException):
            fit()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert isinstance(callback.exception, SIGTERMException)  # SaveOnInterrupt saves there
    assert trainer.global_step == 2  # at the batch's end, before the next one


def test_drop_wandb_init_argument_leaves_it_out_of_wandb_init(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import wandb
    from lightning.pytorch.loggers import WandbLogger

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(wandb, "run", None)
    monkeypatch.setattr(wandb, "init", lambda **kwargs: calls.append(kwargs) or object())

    def init_arguments(drop: bool) -> dict[str, Any]:
        logger = WandbLogger(project="p", save_dir=str(tmp_path), mode="disabled")
        if drop:
            private.drop_wandb_init_argument(logger, "anonymous")
            private.drop_wandb_init_argument(logger, "anonymous")  # absent: nothing happens
        logger.experiment  # noqa: B018  (wandb.init is called here)
        return calls.pop()

    assert "anonymous" in init_arguments(drop=False)  # why the adapter exists
    given = init_arguments(drop=True)
    assert "anonymous" not in given
    assert given["project"] == "p" and given["mode"] == "disabled"


def test_let_grad_scaler_unscale_lets_lightning_clip_a_fused_adamw() -> None:
    import torch
    from lightning.pytorch.plugins.precision import MixedPrecision

    param = torch.nn.Parameter(torch.ones(3))
    fused = torch.optim.AdamW([param], lr=0.1, fused=True)
    param.grad = torch.full((3,), 10.0)
    precision = MixedPrecision("16-mixed", "cpu")
    with pytest.raises(RuntimeError, match="does not allow for gradient clipping"):
        precision.clip_gradients(fused, clip_val=1.0)  # why the adapter exists
    private.let_grad_scaler_unscale(fused)
    precision.clip_gradients(fused, clip_val=1.0)
    assert torch.linalg.vector_norm(param.grad) == pytest.approx(1.0, rel=1e-4)

    # The scaler now unscales before the (still fused) step: the step sees the true gradient.
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    scaled = torch.nn.Parameter(torch.ones(3))
    plain = torch.nn.Parameter(torch.ones(3))
    optimizers = [torch.optim.AdamW([p], lr=0.1, fused=True) for p in (scaled, plain)]
    private.let_grad_scaler_unscale(optimizers[0])
    scaler.scale((scaled * torch.arange(3.0)).sum()).backward()
    (plain * torch.arange(3.0)).sum().backward()
    scaler.step(optimizers[0])
    optimizers[1].step()
    assert torch.equal(scaled.grad, plain.grad)
    assert torch.allclose(scaled, plain)


def test_cpu_bf16_flags_agree_with_the_public_capabilities() -> None:
    import torch

    found = private.cpu_bf16_flags()
    assert isinstance(found, bool)
    if hasattr(torch.cpu, "get_capabilities"):  # training.precision asks it first
        capabilities = torch.cpu.get_capabilities()
        assert found == bool(capabilities["avx512_bf16"] or capabilities["amx_tile"])


def test_inductor_cpp_compiler_finds_gxx_and_answers_none_without_a_compiler(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch._inductor.config as inductor_config

    monkeypatch.delenv("CXX", raising=False)
    # config.patch, not monkeypatch: undoing a monkeypatch of the config proxy deletes the key
    with inductor_config.patch({"cpp.cxx": (None, "/nonexistent/g++")}):
        assert private.inductor_cpp_compiler() is None
    if shutil.which("g++"):
        with inductor_config.patch({"cpp.cxx": (None, "g++")}):
            assert private.inductor_cpp_compiler() == "g++"


def test_dataset_file_builders_are_the_builders_load_dataset_reads_files_with(
    tmp_path: Path,
) -> None:
    import datasets

    builders = private.dataset_file_builders()
    assert {"json", "csv", "parquet", "text", "arrow", "pandas"} <= builders
    assert not {"glue", "wikitext", "nyu-mll/glue", "generator"} & builders
    (tmp_path / "a.jsonl").write_text('{"text": "hello"}\n')
    loaded = datasets.load_dataset(
        "json", data_files=str(tmp_path / "a.jsonl"), cache_dir=str(tmp_path / "cache")
    )
    assert loaded["train"]["text"] == ["hello"]


# --------------------------------------------------------------------------- the scan

# The libraries whose private names the product code may use only through the adapter.
LIBRARIES = frozenset(
    {
        *("optuna", "hydra", "omegaconf", "lightning", "pytorch_lightning", "lightning_fabric"),
        *("lightning_utilities", "torch", "torchmetrics", "datasets", "tokenizers"),
        *("transformers", "lm_eval", "wandb", "safetensors", "huggingface_hub", "accelerate"),
    }
)
ADAPTER = Path("common") / "library_private.py"
# Not product code: the tests, benchmarks and docs, and what tools write in the checkout.
NOT_PRODUCT = {"tests", "bench", "docs", "build", "mutants", "runs", "multirun", "outputs"}
NOT_PRODUCT |= {"wandb", "lightning_logs"}
# Underscore names that are public by convention (namedtuple's API).
PUBLIC = {"_asdict", "_replace", "_fields", "_field_defaults", "_make"}


def is_private(name: str) -> bool:
    dunder = name.startswith("__") and name.endswith("__")
    return name.startswith("_") and not dunder and name not in PUBLIC


def product_files(root: Path) -> list[Path]:
    """Every ``.py`` file of the product under ``root``."""
    found = []
    for directory, subdirectories, files in os.walk(root):
        top = Path(directory) == root
        subdirectories[:] = sorted(
            d
            for d in subdirectories
            if not d.startswith(".")
            and d != "__pycache__"
            and not d.endswith(".egg-info")
            and not (top and d in NOT_PRODUCT)
        )
        found.extend(Path(directory) / f for f in sorted(files) if f.endswith(".py"))
    return found


def own_private_names(trees: list[ast.Module]) -> set[str]:
    """The underscore names the product defines itself: its functions, classes, variables,
    parameters and the attributes it sets on ``self``/``cls``."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id in ("self", "cls")
            ):
                names.add(node.attr)
    return {name for name in names if is_private(name)}


def _library(module: str | None) -> bool:
    return (module or "").partition(".")[0] in LIBRARIES


def private_uses(tree: ast.Module, own: set[str]) -> Iterator[tuple[int, str]]:
    """(line, what) for each private name of a library in ``tree``:

    - an import of a library module or name any part of which starts with ``_``;
    - an underscore attribute of a name bound to a library's import (``torch.cpu._x``);
    - an underscore attribute the product does not define itself (``study._storage``: a
      library object's), on anything but ``self``/``cls`` or a standard-library module;
    - the same through ``getattr``/``setattr``/``hasattr`` with the name as a constant.
    """
    bound: dict[str, str] = {}  # a name an import binds -> the top-level module imported
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if _library(alias.name) and any(is_private(p) for p in parts):
                    yield node.lineno, f"import {alias.name}"
                bound[alias.asname or parts[0]] = parts[0]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            for alias in node.names:
                parts = [*(node.module or "").split("."), alias.name]
                if _library(node.module) and any(is_private(p) for p in parts):
                    yield node.lineno, f"from {node.module} import {alias.name}"
                bound[alias.asname or alias.name] = (node.module or "").partition(".")[0]
    for node in ast.walk(tree):
        name = None
        if isinstance(node, ast.Attribute) and is_private(node.attr):
            name, receiver = node.attr, node.value
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and is_private(node.args[1].value)
        ):
            name, receiver = node.args[1].value, node.args[0]
        if name is None:
            continue
        root = receiver
        while isinstance(root, ast.Attribute):
            root = root.value
        module = bound.get(root.id, "") if isinstance(root, ast.Name) else ""
        if module in LIBRARIES:
            yield node.lineno, f"{ast.unparse(receiver)}.{name}"
        elif name in own or module in sys.stdlib_module_names:
            continue
        elif not (isinstance(receiver, ast.Name) and receiver.id in ("self", "cls")):
            yield node.lineno, f"{ast.unparse(receiver)}.{name}"


def scan(root: Path) -> list[str]:
    """``path:line: what`` for each private name of a library in the product under ``root``
    outside the adapter module."""
    files = product_files(root)
    trees = {path: ast.parse(path.read_text(), str(path)) for path in files}
    own = own_private_names(list(trees.values()))
    return [
        f"{path.relative_to(root)}:{line}: {what}"
        for path, tree in trees.items()
        if path.relative_to(root) != ADAPTER
        for line, what in private_uses(tree, own)
    ]


def test_no_private_name_of_a_library_outside_the_adapter_module() -> None:
    found = scan(ROOT)
    assert found == [], "use common/library_private.py (or a public API):\n" + "\n".join(found)
    assert ROOT / ADAPTER in product_files(ROOT)
    assert not [p for p in product_files(ROOT) if p.relative_to(ROOT).parts[0] == "tests"]


PLANTED = """
import os
import lightning as L
import torch
import torch._inductor.config
from collections import namedtuple
from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES
from hydra._internal.utils import get_args_parser
from torch import cpu

from training import study  # a project module's name, taken by a parameter below


class Mine:
    def __init__(self):
        self._mine = 1

    def beat(self):
        return self.study._storage

    def _helper(self):
        return self._mine, self.__dict__


def uses(study, trial, trainer, record, other):
    study._storage.record_heartbeat(trial._trial_id)
    torch.cpu._is_amx_tile_supported()
    cpu._is_avx512_bf16_supported()
    L.Trainer()._signal_connector
    getattr(trainer, "_signal_connector")
    other._helper(), other._mine, record._asdict(), os._exit, Mine.__name__
"""


def test_the_scan_finds_every_kind_of_planted_private_name(tmp_path: Path) -> None:
    (tmp_path / "common").mkdir()
    (tmp_path / "common" / "planted.py").write_text(PLANTED)
    for ignored in ("tests", "bench", "docs", ".venv", "mutants"):
        (tmp_path / ignored).mkdir()
        (tmp_path / ignored / "planted.py").write_text(PLANTED)
    adapter = (ROOT / ADAPTER).read_text()
    (tmp_path / ADAPTER).write_text(adapter)  # exempt in its place
    (tmp_path / "common" / "copied_adapter.py").write_text(adapter)  # not elsewhere
    found = scan(tmp_path)
    planted = sorted(f.partition(": ")[2] for f in found if f.startswith("common/planted.py"))
    assert planted == sorted(
        [
            "import torch._inductor.config",
            "from datasets.packaged_modules import _PACKAGED_DATASETS_MODULES",
            "from hydra._internal.utils import get_args_parser",
            "study._storage",
            "self.study._storage",
            "trial._trial_id",
            "torch.cpu._is_amx_tile_supported",
            "cpu._is_avx512_bf16_supported",
            "L.Trainer()._signal_connector",
            "trainer._signal_connector",
        ]
    )
    copied = [f for f in found if f.startswith("common/copied_adapter.py")]
    assert len(copied) >= 7  # one or more per adapter function
    assert {f.partition(":")[0] for f in found} == {
        "common/planted.py",
        "common/copied_adapter.py",
    }
