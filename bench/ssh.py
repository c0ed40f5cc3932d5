"""Bench: `invoke exec 'true'` vs `ssh -o BatchMode=yes host true`, and SFTP vs scp throughput.

Both sides talk to the same local OpenSSH sshd (started here on 127.0.0.1, a free port) with the
same key and pinned host key. Run from the project root: `python bench/ssh.py [--runs 9]`.

Latency is reported in pairs that compare like with like: `invoke exec` (a login shell only when
`ray` is not on PATH) against `ssh host true` (target: within 1.3x), and `invoke exec --login`
(always a login shell, Ray's rule) against `ssh host "bash --login -c true"`. Then where exec's
time goes: starting Python (`python -c pass`), importing what `invoke exec` imports (invoke,
tasks.py, paramiko and ops), and the rest (reading the stack outputs, the SSH handshake, auth
and the command itself). Commands run interleaved, round by round, so a busy machine slows
every side alike. Exits 1 when the exec ratio misses its target.
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

TARGET = 1.3
IMPORTS = "import invoke, tasks, paramiko, ops.remote.commands, ops.remote.ssh, ops.stack"
PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(PROJECT_ROOT), str(PROJECT_ROOT / "tests")]

from sshd_server import LocalSshd, stack_outputs_for  # noqa: E402


def median_seconds(
    commands: dict[str, list[str]], env: dict[str, str], runs: int
) -> dict[str, float]:
    """Median wall time of each command, running them in turn each round."""
    timings: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            start = time.perf_counter()
            subprocess.run(command, env=env, cwd=PROJECT_ROOT, check=True, capture_output=True)
            timings[name].append(time.perf_counter() - start)
    return {name: statistics.median(times) for name, times in timings.items()}


def sftp_seconds(env: dict[str, str], source: Path, remote: str) -> float:
    os.environ.update(env)
    from ops.remote.ssh import connect_stack

    with connect_stack(None) as connector:
        sftp = connector.head().open_sftp()
        try:
            start = time.perf_counter()
            sftp.put(str(source), remote)
            return time.perf_counter() - start
        finally:
            sftp.close()


def main() -> int:
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
        # This sshd publishes no key anywhere GCE would: accept it once, as a user would.
        subprocess.run([*invoke, "ssh-config", "--trust-first-use"], env=env, cwd=PROJECT_ROOT,
                       check=True, capture_output=True)  # pins the host key, writes key + Host
        config = workdir / "state" / "bench" / "ssh_config"
        ssh = ["ssh", "-F", str(config), "-o", "BatchMode=yes", "ray-local"]

        ms = {
            name: seconds * 1000
            for name, seconds in median_seconds(
                {
                    "exec": [*invoke, "exec", "true"],
                    "ssh": [*ssh, "true"],
                    "exec --login": [*invoke, "exec", "--login", "true"],
                    "ssh login": [*ssh, "bash --login -c true"],
                    "python": [sys.executable, "-c", "pass"],
                    "imports": [sys.executable, "-c", IMPORTS],
                },
                env,
                options.runs,
            ).items()
        }
        ratio = ms["exec"] / ms["ssh"]
        verdict = "ok" if ratio < TARGET else "OVER TARGET"
        print(f"latency  invoke exec 'true'         {ms['exec']:7.1f} ms   "
              f"ssh host true                  {ms['ssh']:7.1f} ms   "
              f"ratio {ratio:.2f} (target < {TARGET}: {verdict})")
        print(f"latency  invoke exec --login 'true' {ms['exec --login']:7.1f} ms   "
              f"ssh host 'bash --login -c true' {ms['ssh login']:7.1f} ms   "
              f"ratio {ms['exec --login'] / ms['ssh login']:.2f} (same remote work)")
        print(f"where exec's {ms['exec']:.1f} ms go: starting python {ms['python']:.1f} ms, "
              f"imports (invoke, tasks.py, paramiko, ops) {ms['imports'] - ms['python']:.1f} "
              f"ms, outputs + SSH handshake, auth and the command "
              f"{ms['exec'] - ms['imports']:.1f} ms (OpenSSH's whole run: {ms['ssh']:.1f} ms)")

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
    return 0 if ratio < TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
