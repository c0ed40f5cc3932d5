"""Bench: `invoke rsync-up` and `rsync-down` against `scp` and `rsync` over the same local
sshd, in one run.

One large file (MB/s; target >= 0.9x scp) and a folder of many small files (files/s; target
>= 1.0x rsync), each sent to an empty destination; then the folder again, unchanged, which
every tool skips; then the node's copies of both fetched back into empty folders, each way
against the same tool. The stack has a cluster YAML with rsync_exclude and rsync_filter, as a real
one does (rsync-up reads it for the filters). Our first run is cold (no warm connection yet);
the ones after it find the connection it left (RAY_GCP_SSH_PERSIST), as a user's second
rsync-up does; scp and rsync connect anew each time, as they do without a ControlMaster, and
once more through a ControlMaster of their own (OpenSSH users' warm path; no target).
Each side sends to a fresh destination in each of `--rounds` interleaved rounds; medians.
Python runs with compiled bytecode cached (a temporary PYTHONPYCACHEPREFIX), as on a user's
machine. Destinations are on a tmpfs (/dev/shm) when there is one, and dirty pages are
written out before every run: this machine's disk makes 5,000 small files in about 3 s
whatever writes them (a local `tar | tar` too), and a run would otherwise pay for the
writeback of the one before; the bench compares the tools, not the disk. Run from the project root:
`python bench/sync.py [--megabytes 200] [--files 5000] [--rounds 3]`.
Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LARGE_TARGET = 0.9
SMALL_TARGET = 1.0
PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(PROJECT_ROOT)]

from tests.support.sshd_server import CLUSTER_YAML, LocalSshd, stack_outputs_for  # noqa: E402


def seconds(command: list[str], env: dict[str, str]) -> float:
    os.sync()  # the writeback of the run before is not this run's
    start = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=PROJECT_ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr}")
    return time.perf_counter() - start


def stop_masters(state: Path) -> None:
    """End the warm connections the runs left (OpenSSH's masters)."""
    from ops.remote.openssh import control_folder, control_prefix

    folder = control_folder()
    for control in folder.glob(f"{control_prefix(state / 'known_hosts')}-*") if folder else ():
        subprocess.run(["ssh", "-o", f"ControlPath={control}", "-O", "exit", "node"],
                       capture_output=True)


def make_payloads(workdir: Path, megabytes: int, files: int) -> tuple[Path, Path]:
    large = workdir / "large.bin"
    with large.open("wb") as payload:
        block = os.urandom(1 << 20)
        for _ in range(megabytes):
            payload.write(block)
    small = workdir / "small"
    for index in range(files):
        folder = small / f"d{index // 100:03d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"f{index:05d}.txt").write_bytes(os.urandom(64 + index % 2048))
    return large, small


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=int, default=200)
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, LocalSshd(Path(tmp)) as sshd:
        workdir = Path(tmp)
        cluster = workdir / "cluster.yaml"
        cluster.write_text(CLUSTER_YAML.replace("{remote}", str(workdir / "mount"))
                           .replace("{local}", str(workdir)))
        outputs = workdir / "outputs.json"
        outputs.write_text(json.dumps(stack_outputs_for(sshd, cluster_file=str(cluster))))
        env = {
            **{key: value for key, value in os.environ.items()
               if key != "PYTHONDONTWRITEBYTECODE"},
            "PYTHONPYCACHEPREFIX": str(workdir / "pycache"),
            "RAY_GCP_STACK_OUTPUTS": str(outputs), "RAY_GCP_STATE_DIR": str(workdir / "s"),
            "PULUMI_STACK": "bench", "RAY_GCP_SSH_PERSIST": "120",
        }
        invoke = [sys.executable, "-m", "invoke"]
        # This sshd publishes no key anywhere GCE would: accept it once, as a user would.
        subprocess.run([*invoke, "ssh-config", "--trust-first-use"], env=env, cwd=PROJECT_ROOT,
                       check=True, capture_output=True)  # pins the host key, writes key + Host
        subprocess.run([*invoke, "--list"], env=env, cwd=PROJECT_ROOT, check=True,
                       capture_output=True)  # compiles invoke and tasks.py, as a user has
        config = workdir / "s" / "bench" / "ssh_config"
        ssh = f"ssh -F {config} -o BatchMode=yes"
        scp = ["scp", "-q", "-F", str(config), "-o", "BatchMode=yes"]
        # OpenSSH users with a ControlMaster of their own: the same tools, no handshake
        master = ["-o", "ControlMaster=auto", "-o", f"ControlPath={workdir}/cm-%C",
                  "-o", "ControlPersist=120"]
        ssh_master = f"{ssh} {' '.join(master)}"
        subprocess.run([*ssh_master.split(), "ray-local", "true"], check=True)
        large, small = make_payloads(workdir, options.megabytes, options.files)
        shm = Path("/dev/shm")
        out = Path(tempfile.mkdtemp(prefix="bench-sync-", dir=shm if shm.is_dir() else workdir))
        runs: dict[str, list[float]] = {}

        def timed(name: str, command: list[str]) -> None:
            runs.setdefault(name, []).append(seconds(command, env))

        try:
            for run in range(options.rounds):  # interleaved: a busy machine slows all alike
                timed("large ours", [*invoke, "rsync-up", str(large), str(out / f"l{run}.bin")])
                timed("large scp", [*scp, str(large), f"ray-local:{out / f'l-scp{run}.bin'}"])
                timed("large rsync", ["rsync", "-a", "-e", ssh, str(large),
                                      f"ray-local:{out / f'l-rsync{run}.bin'}"])
                timed("small ours", [*invoke, "rsync-up", str(small), str(out / f"s{run}")])
                timed("large scp, master", [*scp, *master, str(large),
                                            f"ray-local:{out / f'l-scpm{run}.bin'}"])
                timed("small rsync, master", ["rsync", "-a", "-e", ssh_master, f"{small}/",
                                              f"ray-local:{out / f's-rsyncm{run}'}/"])
                timed("small rsync", ["rsync", "-a", "-e", ssh, f"{small}/",
                                      f"ray-local:{out / f's-rsync{run}'}/"])
                timed("small scp", [*scp, "-r", str(small), f"ray-local:{out / f's-scp{run}'}"])
                timed("unchanged ours", [*invoke, "rsync-up", str(small), str(out / f"s{run}")])
                timed("unchanged rsync", ["rsync", "-a", "-e", ssh, f"{small}/",
                                          f"ray-local:{out / f's-rsync{run}'}/"])
                back = out / f"back{run}"  # the node's copies, fetched back
                back.mkdir()
                timed("large down ours", [*invoke, "rsync-down", str(out / f"l{run}.bin"),
                                          str(back / "l.bin")])
                timed("large down scp", [*scp, f"ray-local:{out / f'l-scp{run}.bin'}",
                                         str(back / "l-scp.bin")])
                timed("small down rsync", ["rsync", "-a", "-e", ssh,
                                           f"ray-local:{out / f's-rsync{run}'}/",
                                           f"{back / 's-rsync'}/"])
                timed("small down ours", [*invoke, "rsync-down", str(out / f"s{run}"),
                                          str(back / "s")])
                for sent in out.iterdir():  # a tmpfs is memory: keep one round's at most
                    shutil.rmtree(sent) if sent.is_dir() else sent.unlink()
        finally:
            stop_masters(workdir / "s" / "bench")
            subprocess.run([*ssh_master.split(), "-O", "exit", "ray-local"], capture_output=True)
            shutil.rmtree(out, ignore_errors=True)
    cold = runs["large ours"][0]  # the first rsync-up: no warm connection yet
    results = {name: statistics.median(times) for name, times in runs.items()}
    size, count = options.megabytes, options.files
    large_ratio = results["large scp"] / results["large ours"]
    small_ratio = results["small rsync"] / results["small ours"]
    print(f"medians of {options.rounds} interleaved rounds")
    for name, times in runs.items():  # the spread says how noisy the machine was
        print(f"  {name:20s} {' '.join(f'{seconds:.2f}' for seconds in times)} s")
    print(f"one {size} MB file   ours {size / results['large ours']:7.1f} MB/s (the first, cold: "
          f"{size / cold:.1f})   scp {size / results['large scp']:7.1f} MB/s   rsync "
          f"{size / results['large rsync']:7.1f} MB/s   ratio to scp {large_ratio:.2f} (target >= "
          f"{LARGE_TARGET}; the cold one {results['large scp'] / cold:.2f})")
    print(f"{count} small files  ours {count / results['small ours']:7.0f} files/s   "
          f"rsync {count / results['small rsync']:7.0f} files/s   "
          f"scp -r {count / results['small scp']:7.0f} files/s   "
          f"ratio to rsync {small_ratio:.2f} (target >= {SMALL_TARGET})")
    print(f"with a ControlMaster of the user's own up: scp "
          f"{size / results['large scp, master']:.1f} MB/s (ours "
          f"{results['large scp, master'] / results['large ours']:.2f}x), rsync "
          f"{count / results['small rsync, master']:.0f} files/s (ours "
          f"{results['small rsync, master'] / results['small ours']:.2f}x)")
    print(f"{count} unchanged    ours {results['unchanged ours']:.2f} s   "
          f"rsync {results['unchanged rsync']:.2f} s")
    large_down = results["large down scp"] / results["large down ours"]
    small_down = results["small down rsync"] / results["small down ours"]
    print(f"rsync-down: one {size} MB file ours {size / results['large down ours']:7.1f} MB/s   "
          f"scp {size / results['large down scp']:7.1f} MB/s   ratio {large_down:.2f} (target >= "
          f"{LARGE_TARGET}); {count} small files ours "
          f"{count / results['small down ours']:7.0f} files/s   rsync "
          f"{count / results['small down rsync']:7.0f} files/s   ratio {small_down:.2f} "
          f"(target >= {SMALL_TARGET})")
    met = [large_ratio >= LARGE_TARGET, small_ratio >= SMALL_TARGET,
           large_down >= LARGE_TARGET, small_down >= SMALL_TARGET]
    return 0 if all(met) else 1


if __name__ == "__main__":
    sys.exit(main())
