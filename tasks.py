"""invoke tasks: what users type. Each task is a few lines over a library function."""

from __future__ import annotations

from ops.task_flags import task  # invoke's @task with one short-flag vocabulary (README: Flags)
from ops.task_groups import list_in_groups

# --- lifecycle and day two over SSH (issue 3): the logic lives in ops/ ------------------------
# ops modules are imported inside the tasks: `invoke exec` should not pay for pulumi's import.

_STACK_HELP = "Pulumi stack, stacks/Pulumi.<STACK>.yaml (default: $PULUMI_STACK, else the " \
    "selected stack)"
_TRUST_HELP = ("when GCE publishes no host key for a node (a TPU VM, an agent that has not "
               "written them yet), accept the key it offers once and pin it, instead of "
               "refusing")


def _lifecycle(stack: str | None, operation: str) -> None:
    from ops.errors import user_errors
    from ops.pulumi_cli import require_cli, run_operation
    from ops.stack_outputs import resolve_stack_name

    with user_errors():
        name = resolve_stack_name(stack, require_file=True)
        require_cli()
        run_operation(name, operation)


@task(help={
    "stack": _STACK_HELP,
    "restart-only": "running nodes restart Ray without rerunning setup",
    "no-restart": "running nodes rerun changed setup without restarting Ray",
})
def up(c, stack=None, restart_only=False, no_restart=False):
    """Create or update the cluster (refresh, then pulumi up).

    With live progress; preempted TPU slices are replaced, and running nodes re-apply a
    changed startup script themselves."""
    from ops.errors import user_errors
    from ops.reapply import export_request, reapply_request

    with user_errors():
        export_request(reapply_request(restart_only, no_restart))
    _lifecycle(stack, "up")


@task(help={"stack": _STACK_HELP})
def preview(c, stack=None):
    """Show what `invoke up` would create, change or delete."""
    _lifecycle(stack, "preview")


@task(help={
    "stack": _STACK_HELP,
    "workers-only": "only delete the workers (groups, TPU slices, the autoscaler's); keep the head",
    "keep-min-workers": "with --workers-only: keep each type's min_workers (scale down to it)",
})
def down(c, stack=None, workers_only=False, keep_min_workers=False):
    """Delete the cluster (pulumi destroy), or only its workers."""
    if workers_only or keep_min_workers:
        from ops.down_workers import down_workers
        from ops.errors import user_errors
        from ops.stack_outputs import resolve_stack_name

        with user_errors():
            down_workers(resolve_stack_name(stack), keep_min_workers, workers_only)
        return
    _lifecycle(stack, "destroy")


@task(help={"stack": _STACK_HELP})
def refresh(c, stack=None):
    """Reconcile the stack's state with what exists in GCP."""
    _lifecycle(stack, "refresh")


@task(
    help={
        "trust_first_use": _TRUST_HELP,
        "stack": _STACK_HELP,
        "tmux": "attach to (or start) the tmux session `ray`",
        "screen": "attach to (or start) the screen session `ray`",
        "port-forward": "PORT[:REMOTE] forward local PORT to the node's REMOTE port (default "
                        "the same), e.g. -p 8265; repeatable",
        "node": "attach to this worker (reached through the head) instead of the head",
        "new": "with --tmux/--screen: start a new session instead of the shared `ray` one",
    },
    iterable=["port_forward"],
)
def attach(c, stack=None, tmux=False, screen=False, port_forward=None, node=None, new=False,
           trust_first_use=False):
    """A shell on the head (or --node), with port forwards."""
    from ops.attach import PortForward, interactive_shell, parse_forward, session_command
    from ops.errors import exit_status, user_errors
    from ops.sessions import new_session_command
    from ops.ssh import connect_stack

    with user_errors():
        command = new_session_command(tmux, screen) if new else session_command(tmux, screen)
        ports = [parse_forward(spec) for spec in port_forward or []]
    with user_errors(), connect_stack(stack, trust_first_use) as connector:
        target = connector.outputs.node(node) if node else None
        client = connector.node(target) if target else connector.head()
        forwards = [PortForward(client.get_transport(), *pair).start() for pair in ports]
        for forward in forwards:
            print(f"forwarding 127.0.0.1:{forward.local_port} -> port {forward.remote_port}")
        try:
            status = interactive_shell(client, command)
        finally:
            for forward in forwards:
                forward.close()
    exit_status(status)


@task(
    name="exec",
    help={
        "trust_first_use": _TRUST_HELP,
        "cmd": "shell command to run (quote it)",
        "stack": _STACK_HELP,
        "all-nodes": "run on every node in parallel, output prefixed by node",
        "node": "run on this node instead of the head",
        "docker": "run inside the cluster's docker container",
        "login": "always run in a login shell like Ray (default: only if `ray` needs one)",
        "tmux": "run it detached in a window of the tmux session `ray` (see `attach --tmux`)",
        "screen": "run it detached in a window of the screen session `ray`",
        "port-forward": "PORT[:REMOTE] forward local PORT to the node while it runs; "
                        "repeatable",
    },
    iterable=["port_forward"],
)
def exec_(c, cmd, stack=None, all_nodes=False, node=None, docker=False, login=False,
          tmux=False, screen=False, port_forward=None, trust_first_use=False):
    """Run a command on the head or every node, with its status."""
    from ops.errors import OpsError, exit_status, user_errors
    from ops.remote import exec_on_all, exec_on_node
    from ops.sessions import attach_hint, detacher, forwarding, one_node_only
    from ops.ssh import connect_stack

    with user_errors():
        if all_nodes and node:
            raise OpsError("--all-nodes and --node are alternatives: pick one")
    with user_errors(), connect_stack(stack, trust_first_use) as connector:
        wrap = detacher(tmux, screen)
        if all_nodes:
            one_node_only(wrap, port_forward)
            status = exec_on_all(connector, cmd, docker, login)
        else:
            target = connector.outputs.node(node) if node else None
            client = connector.node(target) if target else connector.head()
            with forwarding(client, port_forward):
                status = exec_on_node(connector, target, cmd, docker, login, wrap)
            if wrap and status == 0:
                print(attach_hint(tmux))
    exit_status(status)


@task(
    help={
        "trust_first_use": _TRUST_HELP,
        "script": "local Python script; arguments for it go after `--`",
        "stack": _STACK_HELP,
        "docker": "run it inside the cluster's docker container",
        "login": "always run in a login shell like Ray (default: only if `ray` needs one)",
        "tmux": "run it detached in a window of the tmux session `ray` (see `attach --tmux`)",
        "screen": "run it detached in a window of the screen session `ray`",
        "port-forward": "PORT[:REMOTE] forward local PORT to the head while it runs; "
                        "repeatable",
        "args": "the script's arguments as one string (Ray's deprecated form of `-- ARGS`)",
    },
    iterable=["port_forward"],
)
def submit(c, script, stack=None, docker=False, login=False, tmux=False, screen=False,
           port_forward=None, args=None, trust_first_use=False):
    """Upload a Python script and run it on the head.

    Arguments for the script go after `--`: `invoke submit train.py -- --epochs 3`."""
    import shlex
    import sys
    from pathlib import Path

    from ops.errors import OpsError, exit_status, user_errors
    from ops.remote import remainder_argv
    from ops.remote import submit as submit_script
    from ops.sessions import attach_hint, detacher, forwarding
    from ops.ssh import connect_stack

    script_args = remainder_argv(c.remainder, sys.argv)  # keeps "a b" one argument
    with user_errors():
        if not Path(script).is_file():
            raise OpsError(f"{script} is not a file: pass the path of a Python script")
    with user_errors(), connect_stack(stack, trust_first_use) as connector:
        if args is not None:  # Ray's deprecated `--args "..."`
            if script_args:
                raise OpsError("--args and `-- ARGS` are alternatives: use only `-- ARGS`")
            script_args = shlex.split(args)
        wrap = detacher(tmux, screen)
        with forwarding(connector.head(), port_forward):
            status = submit_script(connector, Path(script), script_args, docker, login, wrap)
        if wrap and status == 0:
            print(attach_hint(tmux))
    exit_status(status)


@task(
    help={
        "trust_first_use": _TRUST_HELP,
        "source": "local file or directory (a directory sends its contents)",
        "target": "remote path (~/ is the login's home)",
        "stack": _STACK_HELP,
        "all-nodes": "send to every node, not only the head",
    }
)
def rsync_up(c, source, target, stack=None, all_nodes=False, trust_first_use=False):
    """Send changed files to the head (or every node).

    Files matching the cluster YAML's rsync_exclude or its rsync_filter files are skipped."""
    from pathlib import Path

    from ops.errors import OpsError, user_errors
    from ops.sync import rsync_up_stack

    with user_errors():
        if not Path(source).exists():
            raise OpsError(f"{source} does not exist: pass a local file or directory")
        rsync_up_stack(stack, {target: source}, all_nodes, trust_first_use)


@task(help={"trust_first_use": _TRUST_HELP, "stack": _STACK_HELP})
def file_mounts(c, stack=None, trust_first_use=False):
    """Sync the cluster YAML's file_mounts to every node."""
    from ops.errors import user_errors
    from ops.sync import rsync_up_stack

    with user_errors():
        rsync_up_stack(stack, None, all_nodes=True, trust_first_use=trust_first_use)


@task(
    help={
        "trust_first_use": _TRUST_HELP,
        "source": "remote file or directory on the head",
        "target": "local path",
        "stack": _STACK_HELP,
    }
)
def rsync_down(c, source, target, stack=None, trust_first_use=False):
    """Fetch changed files from the head.

    Files matching the cluster YAML's rsync_exclude or its rsync_filter files are skipped."""
    from ops.errors import user_errors
    from ops.paths import in_existing_folder
    from ops.ssh import connect_stack
    from ops.sync import rsync_down_head

    with user_errors():
        local = in_existing_folder(target, "target")
    with user_errors(), connect_stack(stack, trust_first_use) as connector:
        print(rsync_down_head(connector, source, local).summary())


@task(help={"trust_first_use": _TRUST_HELP, "stack": _STACK_HELP})
def status(c, stack=None, trust_first_use=False):
    """The stack's nodes, their script versions, `ray status`.

    Nodes with type, kind, state and IPs; which were preempted and when, or vanished (the
    Compute/TPU API); each node's applied startup script version and bootstrap stage; a head
    stopped by autostop is said so."""
    from ops.bootstrap_status import bootstrap_table, read_nodes
    from ops.errors import OpsError, user_errors
    from ops.preemptions import preemption_lines
    from ops.ssh import connect_stack
    from ops.status import head_stopped_note, nodes_table, ray_status

    with user_errors(), connect_stack(stack, trust_first_use) as connector:
        print(nodes_table(connector.outputs), flush=True)
        for line in preemption_lines(connector.outputs):
            print(line, flush=True)
        print()
        try:
            connector.head()
        except OpsError:  # unreachable head: stopped (by autostop?) or gone, says the API
            note = head_stopped_note(connector.outputs)
            if note is None:
                raise
            print(note)
            return
        print(bootstrap_table(read_nodes(connector)), flush=True)
        print()
        print(ray_status(connector))


@task(
    help={
        "trust_first_use": _TRUST_HELP,
        "stack": _STACK_HELP,
        "output": "file to write (default: .ray-gcp/<stack>/ssh_config)",
    }
)
def ssh_config(c, stack=None, output=None, trust_first_use=False):
    """Write an ssh Host block for the head to Include."""

    from ops.errors import user_errors
    from ops.paths import in_existing_folder
    from ops.ssh import connect_stack
    from ops.ssh_config import host_alias, write_ssh_config

    with user_errors():
        chosen = in_existing_folder(output, "--output") if output else None
    with user_errors(), connect_stack(stack, trust_first_use) as connector:
        connector.head()  # pins the head's host key, so the block can say StrictHostKeyChecking
        path = write_ssh_config(connector.outputs, connector.known_hosts, chosen)
    print(f"wrote {path}: add `Include {path.resolve()}` to ~/.ssh/config, then "
          f"`ssh {host_alias(connector.outputs)}`")


# ---------------------------------------------------------------- scale (issue 6)


@task(help={
    "stack": _STACK_HELP,
    "type": "worker node type from available_node_types, e.g. ray_worker_small",
    "count": "desired number of workers of that type, within its [min_workers, max_workers]",
})
def scale(c, type, count, stack=None):  # noqa: A002 - `--type` is the documented flag
    """Set a worker type's count, then run `pulumi up`.

    The count is written under `ray-gcp:workerCounts` in stacks/Pulumi.<stack>.yaml; `pulumi
    up` shows the change and asks before applying it."""
    import shlex

    from ops.errors import OpsError, user_errors
    from ops.pulumi_cli import require_cli
    from ops.scale import set_worker_count
    from ops.stack_outputs import resolve_stack_name

    with user_errors():
        if not str(count).isdigit():
            raise OpsError(f"--count {count!r} is not a whole number: pass a count such as 2")
        name = resolve_stack_name(stack, require_file=True)
        path = set_worker_count(name, type, int(count))
        print(f"{type}: count {count} written to {path}")
        require_cli()
        c.run(f"pulumi up --stack {shlex.quote(name)}", pty=True)


# --- offline plan and diff for reviews (issue 4): the logic lives in ops/plan*.py -------------

@task(
    help={
        "stack": _STACK_HELP,
        "output": "write to this file instead of stdout",
        "format": "json (canonical, byte-identical for the same input) or table",
        "root": "directory holding the stacks/ to plan (default: this checkout)",
    }
)
def plan(c, stack=None, output=None, format="json", root=None):  # noqa: A002
    """Offline plan: every resource the program would register.

    Runs the real program under a mock engine: no cloud, no pulumi CLI."""
    from ops.errors import user_errors
    from ops.plan import plan_stack, render, resolve_plan_args, write_output

    with user_errors():
        name, tree = resolve_plan_args(stack, format, root, output)
        write_output(render(plan_stack(name, tree), format), output)


@task(
    help={
        "stack": _STACK_HELP,
        "base": "git ref whose tree (program and stacks) is the 'before' side, e.g. "
                "origin/main",
        "output": "write the Markdown to this file instead of stdout",
    }
)
def diff(c, base, stack=None, output=None):
    """Markdown diff of the offline plans at --base and now.

    The base side is planned with that tree's own program and stacks, for PR reviews."""
    from ops.errors import user_errors
    from ops.plan import resolve_plan_args, write_output
    from ops.plan_base import diff_stack_markdown

    with user_errors():
        name, _ = resolve_plan_args(stack, "json", None, output, missing_ok=True)
        write_output(diff_stack_markdown(name, base), output)


@task(help={"base": "git ref to compare the working tree against"})
def changed_stacks(c, base):
    """Stacks whose plan may differ from --base (for CI).

    Every stack when the program (infra/, bootstrap/, ops/plan*.py, pyproject.toml) changed,
    else those whose stack file or cluster YAML changed."""
    from ops.errors import user_errors
    from ops.plan_base import changed_stacks as find_changed

    with user_errors():
        for name in find_changed(base):
            print(name)


# ---------------------------------------------------------------- local cluster (bootstrap/)


@task(help={
    "config": "cluster YAML whose head and first worker type run here "
              "(default stacks/clusters/local.yaml)",
    "keep": "leave the cluster running; stop it later with `invoke local-down`",
})
def local_up(c, config="", keep=False):
    """Run a two-node Ray cluster here from the startup scripts.

    Runs a task on each node, then tears the cluster down unless --keep is given."""
    from bootstrap.local_cluster import DEFAULT_CONFIG
    from bootstrap.local_cluster import local_up as start_local_cluster
    from infra.config import load_cluster_config
    from ops.errors import user_errors

    with user_errors():
        cluster = start_local_cluster(load_cluster_config(config or DEFAULT_CONFIG), print)
        try:
            report = cluster.run_program()
            for node in report["nodes"]:
                ran = report["task_ran_on"].get(node["node_id"]) == node["node_id"]
                print(f"node {node['node_id'][:12]}: task ran there: {ran}")
            print(f"local cluster up at {cluster.address}")
        finally:
            if not keep:
                print(f"tearing down: stopped {len(cluster.down())} processes")


@task
def local_down(c):
    """Stop every local cluster `local-up --keep` left running."""
    from bootstrap.local_cluster import local_down as stop_local_cluster
    from ops.errors import user_errors

    with user_errors():
        stop_local_cluster(print)


# --- the rest of `ray`'s cluster verbs (issue 13): the logic lives in ops/ ------------------


@task(help={
    "trust_first_use": _TRUST_HELP,
    "stack": _STACK_HELP,
    "port": "local port to forward (default 8265; the next free one if busy; 0: any)",
    "remote-port": "the dashboard's port on the head (default 8265)",
})
def dashboard(c, stack=None, port=8265, remote_port=8265, trust_first_use=False):
    """Forward the head's Ray dashboard here and print its URL.

    Runs until Ctrl-C."""
    import threading

    from ops.dashboard import forward_dashboard
    from ops.errors import user_errors
    from ops.ssh import connect_stack

    with user_errors(), connect_stack(stack, trust_first_use) as connector:
        forward = forward_dashboard(connector, int(port), int(remote_port))
        print(f"dashboard: http://127.0.0.1:{forward.local_port} (Ctrl-C stops)", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print("stopped")
        finally:
            forward.close()


@task(help={"stack": _STACK_HELP, "internal": "print the internal IP, not the external one"})
def get_head_ip(c, stack=None, internal=False):
    """Print the head's IP, for scripts.

    External unless --internal."""
    from ops.cluster_ips import head_ip
    from ops.errors import user_errors
    from ops.stack_outputs import load_outputs

    with user_errors():
        print(head_ip(load_outputs(stack), internal))


@task(help={"stack": _STACK_HELP, "internal": "print internal IPs, not external ones"})
def get_worker_ips(c, stack=None, internal=False):
    """Print each worker's IP, one a line.

    External, or internal where a node has none (or with --internal)."""
    from ops.cluster_ips import worker_ips
    from ops.errors import user_errors
    from ops.stack_outputs import load_outputs

    with user_errors():
        for ip in worker_ips(load_outputs(stack), internal):
            print(ip)


@task(help={"trust_first_use": _TRUST_HELP, "stack": _STACK_HELP,
            "lines": "number of lines to show first (default 100)"})
def monitor(c, stack=None, lines=100, trust_first_use=False):
    """Follow the autoscaler's log on the head.

    The head's monitor.* logs, as `ray monitor` follows them."""
    from ops.errors import exit_status, user_errors
    from ops.monitor import monitor as follow_monitor
    from ops.ssh import connect_stack

    with user_errors(), connect_stack(stack, trust_first_use) as connector:
        status = follow_monitor(connector, int(lines))
    exit_status(status)


@task(help={
    "trust_first_use": _TRUST_HELP,
    "stack": _STACK_HELP,
    "output": "archive to write (default collected_logs_<date>_<time>.tar.gz)",
    "logs": "the session's Ray logs (default on; --no-logs skips them)",
    "debug-state": "Ray's debug_state*.txt (default on; part of the logs)",
    "pip": "`pip freeze` of each node (default on)",
    "processes": "the process list of each node (default on)",
    "processes-verbose": "the full command lines in it (default on)",
})
def cluster_dump(c, stack=None, output=None, logs=True, debug_state=True, pip=True,
                 processes=True, processes_verbose=True, trust_first_use=False):
    """Collect every node's Ray logs into one local archive.

    Ray's logs, debug state, `pip freeze` and processes, with a progress bar."""
    from pathlib import Path

    from ops.cluster_dump import DumpParts, default_output
    from ops.cluster_dump import cluster_dump as dump
    from ops.errors import user_errors
    from ops.ssh import connect_stack

    parts = DumpParts(logs, debug_state, pip, processes, processes_verbose)
    with user_errors(), connect_stack(stack, trust_first_use) as connector:
        archive, failed = dump(connector, Path(output) if output else default_output(), parts)
    for line in failed:
        print(f"warning: not in the archive: {line}")
    print(f"wrote {archive}")


@task(help={
    "trust_first_use": _TRUST_HELP,
    "stack": _STACK_HELP,
    "yes": "do not ask for confirmation",
    "hard": "delete the instance through the API instead of `ray stop` on it",
})
def kill_random_node(c, stack=None, yes=False, hard=False, trust_first_use=False):
    """Stop Ray on a random worker, for failure drills.

    `ray stop` on it (--hard: delete its instance); asks first unless --yes."""
    from ops.errors import user_errors
    from ops.kill_node import kill_random_node as kill
    from ops.ssh import connect_stack

    with user_errors(), connect_stack(stack, trust_first_use) as connector:
        node = kill(connector, yes, hard)
    if node is not None:
        print(f"Killed node with IP {node.internal_ip}")


# ---------------------------------------------------------------- capacity (issue 12)


@task(help={"stack": _STACK_HELP})
def preflight(c, stack=None):
    """Check the largest cluster against the region's quotas.

    The head plus every type at max_workers against the region's Compute quotas and the
    zone's Cloud TPU quotas, as a table; creates nothing, exits 1 when a quota is short."""
    from invoke.exceptions import Exit

    from infra.config import load_cluster_config
    from infra.stack_config import cluster_path_for_stack
    from ops import preflight as quota_preflight
    from ops.errors import user_errors
    from ops.stack_outputs import resolve_stack_name

    with user_errors():
        name = resolve_stack_name(stack, require_file=True)
        config = load_cluster_config(cluster_path_for_stack(name))
        report = quota_preflight.preflight(config)
        print(quota_preflight.render(report))
    if report.short:
        raise Exit(code=1)


# ---------------------------------------------------------------- autostop and cost (issue 14)


@task(help={
    "trust_first_use": _TRUST_HELP,
    "stack": _STACK_HELP,
    "minutes": "idle minutes after which the head stops every node of the cluster",
    "down": "delete the nodes instead of stopping them",
    "cancel": "turn autostop off",
})
def autostop(c, stack=None, minutes=None, down=False, cancel=False, trust_first_use=False):
    """Change a running cluster's autostop.

    --minutes N [--down], or --cancel; no node is recreated."""
    from ops.autostop import parse_request, set_autostop
    from ops.errors import user_errors
    from ops.ssh import connect_stack

    with user_errors():
        idle_minutes = parse_request(minutes, down, cancel)
        with connect_stack(stack, trust_first_use) as connector:
            print(set_autostop(connector, idle_minutes, down))


@task(help={"stack": _STACK_HELP})
def cost(c, stack=None):
    """What the stack's cluster costs, so far and per hour.

    Per node type its hourly price, per node its hours run (from the instances' timestamps),
    the total so far and per hour now."""
    from ops.cost import cost_report, node_costs
    from ops.errors import user_errors
    from ops.plan import cluster_from_settings, stack_settings
    from ops.stack_outputs import resolve_stack_name

    with user_errors():
        name = resolve_stack_name(stack, require_file=True)
        config, _ = cluster_from_settings(stack_settings(name))
        print(cost_report(name, config, node_costs(config)), end="")


# --- `invoke --list` shows the tasks under these headings, in this order (ops/task_groups.py) ---

TASK_GROUPS = (
    ("Cluster lifecycle", (up, preview, refresh, down, scale, autostop, preflight)),
    ("Nodes and sessions", (attach, exec_, submit, dashboard, get_head_ip, get_worker_ips,
                            ssh_config)),
    ("Files", (rsync_up, rsync_down, file_mounts)),
    ("Health and debugging", (status, monitor, cluster_dump, kill_random_node)),
    ("Plans, review and cost", (plan, diff, changed_stacks, cost)),
    ("Local cluster", (local_up, local_down)),
)
list_in_groups(TASK_GROUPS)
