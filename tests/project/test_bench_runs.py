"""The fake-API benchmarks still run against today's code (they are not part of the suite's
timings: a tiny size, and only that they finish and print their ratio line are checked)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.program_runs import PROJECT_ROOT

TINY = ["--workers", "3", "--latency", "0", "--operation", "0.05"]


@pytest.mark.slow  # 67-88 s on a loaded 2-core machine: each bench runs its rounds
@pytest.mark.parametrize(("module", "extra", "ratio_line"), [
    ("bench.capacity", ["--repeats", "1", "--refused", "0.05"], "ratio failover:healthy = "),
    ("bench.scale", [], "ratio 3:1 = "),
])
def test_fake_api_bench_runs_to_its_ratio_line(module, extra, ratio_line):
    run = subprocess.run([sys.executable, "-m", module, *TINY, *extra], cwd=PROJECT_ROOT,
                         capture_output=True, text=True, timeout=300)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode in (0, 1)  # 1: a missed target, which a tiny run may well miss
    assert ratio_line in run.stdout, run.stdout


@pytest.mark.slow  # as long as the other benches
def test_status_bench_runs_to_its_ratio_line():
    """Against HEAD (main may not exist in a clone): one round, only that it finishes."""
    run = subprocess.run([sys.executable, "-m", "bench.status", "--baseline", "HEAD",
                          "--rounds", "1"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                         timeout=300)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode == 0, run.stdout + run.stderr
    assert "ratio this:baseline = " in run.stdout, run.stdout


@pytest.mark.slow  # as long as the other benches
def test_fanout_bench_runs_to_its_ratio_lines(sshd):
    """Four nodes, one round: only that it finishes and prints both ratios (its sshds make
    this an `sshd` test, through the fixture's marker)."""
    run = subprocess.run([sys.executable, "-m", "bench.fanout", "--workers", "3", "--runs", "1"],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode in (0, 1), run.stdout + run.stderr
    for name in ("exec", "rsync-up"):
        assert f"{name} --all-nodes: 4 nodes " in run.stdout and "ratio 4:1 = " in run.stdout


@pytest.mark.slow  # the engine's up, two scales and destroy of a tiny cluster
def test_scale_curve_bench_runs_to_its_ratio_lines(engine_bin):
    """The curve's quick mode (2 workers, then 3 and 1, through the engine, Google-like fake):
    only that every phase finishes and the ratio lines print (one size: its own base)."""
    run = subprocess.run([sys.executable, "-m", "bench.scale_curve", "--quick"],
                         cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=1800)
    assert "Traceback" not in run.stderr, run.stderr
    assert run.returncode in (0, 1), run.stdout + run.stderr  # 1: a missed target
    assert "ratio up 2:2 = " in run.stdout and "ratio down 2:2 = " in run.stdout, run.stdout
