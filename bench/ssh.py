"""Bench: `invoke exec 'true'` vs `ssh -o BatchMode=yes host true`, and SFTP vs scp throughput.

Both sides talk to the same local OpenSSH sshd (started here on 127.0.0.1, a free port) with the
same key and pinned host key. Run from the project root: `python bench/ssh.py [--runs 9]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(PROJECT_ROOT), str(PROJECT_ROOT / "tests")]

from sshd_server import LocalSshd, stack_outputs_for  # noqa: E402


def median_seconds(command: list[str], env: dict[str, str], runs: int) -> float:
    timings = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, env=env, cwd=PROJECT_ROOT, check=True, capture_output=True)
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def sftp_seconds(env: dict[str, str], source: Path, remote: str) -> float:
    os.environ.update(env)
    from ops.ssh import connect_stack

    with connect_stack(None) as connector:
        sftp = connector.head().open_sftp()
        try:
            start = time.perf_counter()
            sftp.put(str(source), remote)
            return time.perf_counter() - start
        finally:
            sftp.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--megabytes", type=int, default=200)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalSshd(Path(tmp)) as sshd:
        workdir = Path(tmp)
        outputs = workdir / "outputs.json"
        outputs.write_text(json.dumps(stack_outputs_for(sshd)))
        env = {
            **os.environ,
            "RAY_GCP_STACK_OUTPUTS": str(outputs),
            "RAY_GCP_STATE_DIR": str(workdir / "state"),
            "PULUMI_STACK": "bench",
        }
        invoke = [sys.executable, "-m", "invoke"]
        subprocess.run([*invoke, "ssh-config"], env=env, cwd=PROJECT_ROOT, check=True,
                       capture_output=True)  # pins the host key, writes key + Host block
        config = workdir / "state" / "bench" / "ssh_config"
        ssh = ["ssh", "-F", str(config), "-o", "BatchMode=yes", "ray-local"]

        ours = median_seconds([*invoke, "exec", "true"], env, options.runs)
        theirs = median_seconds([*ssh, "true"], env, options.runs)
        print(f"latency  invoke exec 'true' {ours * 1000:7.1f} ms   "
              f"ssh true {theirs * 1000:7.1f} ms   ratio {ours / theirs:.2f} (target < 1.5)")

        source = workdir / "payload.bin"
        with source.open("wb") as payload:
            block = os.urandom(1 << 20)
            for _ in range(options.megabytes):
                payload.write(block)
        sftp = sftp_seconds(env, source, str(workdir / "via-sftp.bin"))
        start = time.perf_counter()
        subprocess.run(["scp", "-q", "-F", str(config), "-o", "BatchMode=yes", str(source),
                        f"ray-local:{workdir / 'via-scp.bin'}"], check=True)
        scp = time.perf_counter() - start
        size = options.megabytes
        print(f"transfer {size} MB  sftp {size / sftp:7.1f} MB/s   scp {size / scp:7.1f} MB/s"
              f"   ratio (scp time / sftp time) {scp / sftp:.2f}")


if __name__ == "__main__":
    main()
