"""Bench: `invoke exec true` cold and warm against `ssh host true` and OpenSSH's ControlMaster.

Every side talks to the same local OpenSSH sshd (started here on 127.0.0.1, a free port) with
the same key and pinned host key, `ray` on the session's PATH as on a node (so exec starts no
login shell and both sides do the same remote work). Run from the project root:
`python bench/ssh.py [--runs 9]`.

Reported, as medians of interleaved rounds (a busy machine slows every side alike):
- `invoke exec` cold (`RAY_GCP_SSH_PERSIST=0`: a full handshake; target <= 1.3x `ssh host
  true`) and warm (through the node's warm connection, ops.remote.warm; target <= 1.0x);
- both against `ssh` with a ControlMaster already up (OpenSSH's own warm path);
- `invoke exec --login` against `ssh host "bash --login -c true"` (Ray's login shell);
- where the time goes: starting Python, importing what each path imports, the rest.
With `--stack` (needs the engine `invoke engine` installs), the same outputs also live in a
real stack (a file backend in the temp folder, deployed by the engine): `invoke get-head-ip`
reading them with the pulumi CLI (`RAY_GCP_SSH_PERSIST=0`), from the outputs keeper
(ops.stacks.kept_outputs) and from the outputs file, and a warm exec reading them from the keeper.
Python runs as it does on a user's machine, with compiled bytecode cached (in a temporary
PYTHONPYCACHEPREFIX, filled by the first runs): an environment with PYTHONDONTWRITEBYTECODE=1
would compile every module from source on every run, 100 ms of a warm exec. Exits 1 when a
target is missed.
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
WARM_TARGET = 1.0
IMPORTS = ("import invoke, tasks, paramiko, ops.remote.shell, ops.remote.ssh_direct, "
           "ops.stacks.stack")
WARM_IMPORTS = "import invoke, tasks, ops.remote.shell, ops.stacks.stack"
PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(PROJECT_ROOT)]

from tests.support.sshd_server import LocalSshd, stack_outputs_for  # noqa: E402


def median_ms(commands: dict[str, tuple[list[str], dict[str, str]]], runs: int
              ) -> dict[str, float]:
    """Median wall time of each (command, environment), running them in turn each round."""
    timings: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, (command, env) in commands.items():
            start = time.perf_counter()
            subprocess.run(command, env=env, cwd=PROJECT_ROOT, check=True, capture_output=True)
            timings[name].append(time.perf_counter() - start)
    return {name: statistics.median(times) * 1000 for name, times in timings.items()}


def wait_for_socket(state: Path, within_s: float = 60) -> Path:
    deadline = time.monotonic() + within_s
    while not (sockets := list(state.glob("warm-*.sock"))):
        if time.monotonic() > deadline:
            raise SystemExit(f"no warm connection in {state} after {within_s:.0f}s")
        time.sleep(0.05)
    return sockets[0]


def deploy_stack(workdir: Path, outputs: dict[str, object]) -> dict[str, str]:
    """Stack `bench` holding `outputs` (the key and token as secrets), made by the pinned engine
    in a file backend under `workdir`; the environment a task reads it with."""
    from pulumi import automation as auto

    from ops.engine import installed_bin

    bin_dir = installed_bin()
    if bin_dir is None:
        raise SystemExit("--stack needs the pinned engine: run `invoke engine` first")
    project, backend = workdir / "project", workdir / "backend"
    project.mkdir()
    backend.mkdir()
    (project / "Pulumi.yaml").write_text("name: ray-gcp\nruntime: python\n")
    env = {"PULUMI_BACKEND_URL": f"file://{backend}", "PULUMI_CONFIG_PASSPHRASE": "bench",
           "PULUMI_HOME": str(workdir / "pulumi-home"), "PULUMI_SKIP_UPDATE_CHECK": "true"}

    def program() -> None:
        import pulumi

        for name, value in outputs.items():
            secret = name in ("ssh_private_key", "ray_auth_token")
            pulumi.export(name, pulumi.Output.secret(value) if secret else value)

    stack = auto.create_or_select_stack(
        stack_name="bench", project_name="ray-gcp", program=program,
        opts=auto.LocalWorkspaceOptions(work_dir=str(project), pulumi_home=env["PULUMI_HOME"],
                                        env_vars=env,
                                        pulumi_command=auto.PulumiCommand(
                                            root=str(bin_dir.parent))))
    stack.up()
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--stack", action="store_true",
                        help="also read the outputs from a real stack (CLI against the keeper)")
    options = parser.parse_args()
    from ops.remote.warm import stop_daemon
    from ops.stacks.kept_outputs import stop_keeper

    path = f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"
    with tempfile.TemporaryDirectory() as tmp, \
            LocalSshd(Path(tmp), set_env={"PATH": path}) as sshd:
        workdir = Path(tmp)
        outputs = workdir / "outputs.json"
        outputs.write_text(json.dumps(stack_outputs_for(sshd)))
        warm = {
            **{key: value for key, value in os.environ.items()
               if key != "PYTHONDONTWRITEBYTECODE"},
            "PYTHONPYCACHEPREFIX": str(workdir / "pycache"),
            "RAY_GCP_STACK_OUTPUTS": str(outputs),
            "RAY_GCP_STATE_DIR": str(workdir / "state"),
            "PULUMI_STACK": "bench",
            "RAY_GCP_SSH_PERSIST": "120",
        }
        cold = {**warm, "RAY_GCP_SSH_PERSIST": "0"}
        invoke = [sys.executable, "-m", "invoke"]
        # This sshd publishes no key anywhere GCE would: accept it once, as a user would.
        subprocess.run([*invoke, "ssh-config", "--trust-first-use"], env=cold,
                       cwd=PROJECT_ROOT, check=True, capture_output=True)
        config = workdir / "state" / "bench" / "ssh_config"
        ssh = ["ssh", "-F", str(config), "-o", "BatchMode=yes"]
        control = [*ssh, "-o", "ControlMaster=auto", "-o", f"ControlPath={workdir}/cm-%C",
                   "-o", "ControlPersist=120"]
        subprocess.run([*control, "ray-local", "true"], check=True)  # OpenSSH's master
        subprocess.run([*invoke, "exec", "true"], env=warm, cwd=PROJECT_ROOT, check=True,
                       capture_output=True)  # starts the node's warm connection
        socket = wait_for_socket(workdir / "state" / "bench")
        stack_runs: dict[str, tuple[list[str], dict[str, str]]] = {}
        if options.stack:
            from_stack = {**{key: value for key, value in warm.items()
                             if key != "RAY_GCP_STACK_OUTPUTS"},
                          **deploy_stack(workdir, stack_outputs_for(sshd))}
            head_ip = [*invoke, "get-head-ip"]
            subprocess.run(head_ip, env=from_stack, cwd=PROJECT_ROOT, check=True,
                           capture_output=True)  # starts the keeper
            stack_runs = {
                "head-ip cli": (head_ip, {**from_stack, "RAY_GCP_SSH_PERSIST": "0"}),
                "head-ip kept": (head_ip, from_stack),
                "head-ip file": (head_ip, warm),
                "exec warm kept": ([*invoke, "exec", "true"], from_stack),
            }
        try:
            ms = median_ms({
                **stack_runs,
                "exec cold": ([*invoke, "exec", "true"], cold),
                "exec warm": ([*invoke, "exec", "true"], warm),
                "ssh": ([*ssh, "ray-local", "true"], cold),
                "ssh controlmaster": ([*control, "ray-local", "true"], cold),
                "exec --login warm": ([*invoke, "exec", "--login", "true"], warm),
                "ssh login": ([*ssh, "ray-local", "bash --login -c true"], cold),
                "python": ([sys.executable, "-c", "pass"], cold),
                "invoke": ([*invoke, "--version"], cold),
                "imports cold": ([sys.executable, "-c", IMPORTS], cold),
                "imports warm": ([sys.executable, "-c", WARM_IMPORTS], cold),
            }, options.runs)
        finally:
            stop_daemon(socket)
            if options.stack:
                os.environ["RAY_GCP_STATE_DIR"] = warm["RAY_GCP_STATE_DIR"]
                stop_keeper()
            subprocess.run([*control, "-O", "exit", "ray-local"], capture_output=True)
    ratio, warm_ratio = ms["exec cold"] / ms["ssh"], ms["exec warm"] / ms["ssh"]
    cold_ok, warm_ok = ratio <= TARGET, warm_ratio <= WARM_TARGET
    print(f"invoke exec true, cold  {ms['exec cold']:7.1f} ms   ssh host true {ms['ssh']:7.1f} ms"
          f"   ratio {ratio:.2f} (target <= {TARGET}: {'ok' if cold_ok else 'OVER TARGET'})")
    print(f"invoke exec true, warm  {ms['exec warm']:7.1f} ms   ssh host true {ms['ssh']:7.1f} ms"
          f"   ratio {warm_ratio:.2f} (target <= {WARM_TARGET}: "
          f"{'ok' if warm_ok else 'OVER TARGET'})")
    print(f"against ssh with a ControlMaster up ({ms['ssh controlmaster']:.1f} ms): "
          f"cold {ms['exec cold'] / ms['ssh controlmaster']:.2f}x, "
          f"warm {ms['exec warm'] / ms['ssh controlmaster']:.2f}x")
    print(f"invoke exec --login true, warm {ms['exec --login warm']:7.1f} ms   "
          f"ssh host 'bash --login -c true' {ms['ssh login']:7.1f} ms   "
          f"ratio {ms['exec --login warm'] / ms['ssh login']:.2f} (same remote work)")
    print(f"where the time goes: starting python {ms['python']:.1f} ms; invoke alone "
          f"(`invoke --version`) {ms['invoke']:.1f} ms; imports of a cold exec (with paramiko) "
          f"{ms['imports cold'] - ms['python']:.1f} ms, of a warm one "
          f"{ms['imports warm'] - ms['python']:.1f} ms; the rest (outputs, handshake or relay, "
          f"the command): cold {ms['exec cold'] - ms['imports cold']:.1f} ms, warm "
          f"{ms['exec warm'] - ms['imports warm']:.1f} ms")
    if options.stack:
        print(f"invoke get-head-ip from a stack: pulumi CLI {ms['head-ip cli']:.1f} ms, outputs "
              f"keeper {ms['head-ip kept']:.1f} ms ({ms['head-ip cli'] / ms['head-ip kept']:.2f}x"
              f" faster), outputs file {ms['head-ip file']:.1f} ms; invoke exec true, warm, "
              f"outputs from the keeper {ms['exec warm kept']:.1f} ms, ratio "
              f"{ms['exec warm kept'] / ms['ssh']:.2f} to ssh host true")
    return 0 if cold_ok and warm_ok else 1


if __name__ == "__main__":
    sys.exit(main())
