"""``python -m features.scaling.fit points.csv --flops C``: the table read, its mistakes refused
in one line, the fit printed; and a start that imports no torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from features.scaling.fit import main
from tests.conftest import ROOT
from tests.features.scaling.points import TRUE, law_points


def write_table(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text("\n".join([header, *rows]) + "\n", encoding="utf-8")
    return path


def test_the_command_prints_the_fit_and_the_split(tmp_path: Path, capsys) -> None:
    n, d, loss = law_points(noise=0.0)
    rows = [f"{a:.17g},{b:.17g},{c:.17g}" for a, b, c in zip(n, d, loss, strict=True)]
    table = write_table(tmp_path / "points.csv", "params,tokens,loss", rows)
    argv = [str(table), "--flops", "1e21", "--grid", "coarse", "--bootstrap", "3"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "243 starts (coarse grid" in out and "3 bootstrap resamples (seed 0; 3 kept)" in out
    printed = {line.split()[0]: line.split()[1] for line in out.splitlines() if line[:2] == "  "}
    for name, symbol in (("E", "E"), ("A", "A"), ("B", "B"), ("alpha", "α"), ("beta", "β")):
        assert float(printed[symbol]) == pytest.approx(TRUE[name], rel=2e-3), name
    assert float(printed["D_opt"]) * float(printed["N_opt"]) * 6 == pytest.approx(1e21, rel=1e-3)
    assert "Approach 2" not in out  # no flops column


def test_a_flops_column_adds_the_isoflop_minima(tmp_path: Path, capsys) -> None:
    rows = [
        f"{n},{flops / (6 * n)},{2 + 0.3 * (f - 1) ** 2},{flops}"
        for flops in (1e18, 1e20)
        for f, n in ((0.5, 1e8), (1.0, 2e8), (1.5, 4e8))
    ]
    table = write_table(tmp_path / "points.csv", "params,tokens,loss,flops", rows)
    assert main([str(table), "--grid", "coarse", "--bootstrap", "0"]) == 0
    out = capsys.readouterr().out
    assert "(no bootstrap)" in out and "Compute-optimal" not in out
    assert out.count("3 points, N* = ") == 2


@pytest.mark.parametrize(
    ("header", "rows", "message"),
    [
        (None, [], "no.csv: no such file; give a CSV with columns params,tokens,loss"),
        ("params,loss", ["1,2"], "has no column tokens (its header: params,loss)"),
        ("params,tokens,loss", ["1e6,1e9,3.0", "1e6,0,3.0"], "line 3: tokens='0' must be"),
        ("params,tokens,loss", ["1e6,1e9,x"], "line 2: loss='x' must be a positive number"),
        ("params,tokens,loss", ["1e6,1e9,3.0"] * 4, "holds 4 points: fewer than the 5"),
    ],
)
def test_bad_tables_are_refused_in_one_line(
    tmp_path: Path, capsys, header: str | None, rows: list[str], message: str
) -> None:
    path = tmp_path / "no.csv"
    if header is not None:
        write_table(path, header, rows)
    assert main([str(path)]) == 1
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith("tinylm: error: ") and message in line, line
    assert captured.out == ""


def test_a_bad_budget_is_refused(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path / "x.csv"), "--flops", "-1"]) == 1
    assert "--flops -1.0 must be > 0" in capsys.readouterr().err


def test_the_command_loads_no_torch() -> None:
    code = (
        "import json, sys; import features.scaling.fit; "
        "print(json.dumps([m for m in ('torch', 'lightning', 'hydra', 'matplotlib') "
        "if m in sys.modules]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == []
