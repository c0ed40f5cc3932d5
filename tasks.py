"""invoke tasks: what users type. Each task is a few lines over a library function."""

from __future__ import annotations

from invoke import Task, task  # noqa: F401  (tasks are added below, one section per room)

# --- lifecycle and day two over SSH (issue 3): the logic lives in ops/ ------------------------
# ops modules are imported inside the tasks: `invoke exec` should not pay for pulumi's import.

_STACK_HELP = "Pulumi stack (default: $PULUMI_STACK or the selected stack)"


def _long_only(*names: str) -> type[Task]:
    """A Task class giving `names` no short flag: flags issue 13 added to existing tasks get
    only `ray`'s long names, so no letter means two things across tasks."""

    class LongOnly(Task):
        def arg_opts(self, name: str, default: object, taken_names: set[str]) -> dict:
            opts = super().arg_opts(name, default, taken_names)
            if name in names:
                opts["names"] = opts["names"][:1]
            return opts

    return LongOnly


def _lifecycle(stack: str | None, operation: str) -> None:
    from ops.errors import user_errors
    from ops.pulumi_cli import require_cli, run_operation
    from ops.stack_outputs import resolve_stack_name

    with user_errors():
        require_cli()
        run_operation(resolve_stack_name(stack), operation)


@task(klass=_long_only("restart_only", "no_restart"), help={
    "stack": _STACK_HELP,
    "restart-only": "running nodes restart Ray without rerunning setup",
    "no-restart": "running nodes rerun changed setup without restarting Ray",
})
def up(c, stack=None, restart_only=False, no_restart=False):
    """Create or update the cluster: refresh, then pulumi up (replacing preempted TPU slices)
    with live progress; running nodes re-apply a changed startup script themselves."""
    from ops.errors import user_errors
    from ops.reapply import export_request, reapply_request

    with user_errors():
        export_request(reapply_request(restart_only, no_restart))
    _lifecycle(stack, "up")


@task(help={"stack": _STACK_HELP})
def preview(c, stack=None):
    """Show what `invoke up` would create, change or delete."""
    _lifecycle(stack, "preview")


@task(klass=_long_only("workers_only", "keep_min_workers"), help={
    "stack": _STACK_HELP,
    "workers-only": "only delete the workers (the groups' and the autoscaler's); keep the head",
    "keep-min-workers": "with --workers-only: keep each type's min_workers (scale down to it)",
})
def down(c, stack=None, workers_only=False, keep_min_workers=False):
    """Delete every resource of the cluster (pulumi destroy), or only its workers."""
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
        "stack": _STACK_HELP,
        "tmux": "attach to (or start) the tmux session `ray`",
        "screen": "attach to (or start) the screen session `ray`",
        "port-forward": "forward local PORT (or LOCAL:REMOTE) to the node, e.g. 8265; repeatable",
        "node": "attach to this worker (reached through the head) instead of the head",
        "new": "with --tmux/--screen: start a new session instead of the shared `ray` one",
    },
    iterable=["port_forward"],
    klass=_long_only("new"),
)
def attach(c, stack=None, tmux=False, screen=False, port_forward=None, node=None, new=False):
    """Interactive shell on the head (or --node) with port forwards."""
    from ops.attach import PortForward, interactive_shell, parse_forward, session_command
    from ops.errors import exit_status, user_errors
    from ops.sessions import new_session_command
    from ops.ssh import connect_stack

    with user_errors(), connect_stack(stack) as connector:
        command = new_session_command(tmux, screen) if new else session_command(tmux, screen)
        target = connector.outputs.node(node) if node else None
        client = connector.node(target) if target else connector.head()
        forwards = [
            PortForward(client.get_transport(), *parse_forward(spec)).start()
            for spec in port_forward or []
        ]
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
        "cmd": "shell command to run (quote it)",
        "stack": _STACK_HELP,
        "all": "run on every node in parallel, output prefixed by node",
        "node": "run on this node instead of the head",
        "docker": "run inside the cluster's docker container",
        "login": "always run in a login shell like Ray (default: only if `ray` needs one)",
        "tmux": "run it detached in a window of the tmux session `ray` (see `attach --tmux`)",
        "screen": "run it detached in a window of the screen session `ray`",
        "port-forward": "forward local PORT (or LOCAL:REMOTE) to the node while it runs",
    },
    iterable=["port_forward"],
    klass=_long_only("tmux", "screen"),
)
def exec_(c, cmd, stack=None, all=False, node=None, docker=False, login=False,  # noqa: A002
          tmux=False, screen=False, port_forward=None):
    """Run a command on the head or every node, with its exit status."""
    from ops.errors import exit_status, user_errors
    from ops.remote import exec_on_all, exec_on_node
    from ops.sessions import attach_hint, detacher, forwarding, one_node_only
    from ops.ssh import connect_stack

    with user_errors(), connect_stack(stack) as connector:
        wrap = detacher(tmux, screen)
        if all:
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
        "script": "local Python script; arguments for it go after `--`",
        "stack": _STACK_HELP,
        "docker": "run it inside the cluster's docker container",
        "login": "always run in a login shell like Ray (default: only if `ray` needs one)",
        "tmux": "run it detached in a window of the tmux session `ray` (see `attach --tmux`)",
        "screen": "run it detached in a window of the screen session `ray`",
        "port-forward": "forward local PORT (or LOCAL:REMOTE) to the head while it runs",
        "args": "the script's arguments as one string (Ray's deprecated form of `-- ARGS`)",
    },
    iterable=["port_forward"],
    klass=_long_only("tmux", "screen", "args"),
)
def submit(c, script, stack=None, docker=False, login=False, tmux=False, screen=False,
           port_forward=None, args=None):
    """Upload a script and run it on the head: s.py -- ARGS."""
    import shlex
    import sys
    from pathlib import Path

    from ops.errors import OpsError, exit_status, user_errors
    from ops.remote import remainder_argv
    from ops.remote import submit as submit_script
    from ops.sessions import attach_hint, detacher, forwarding
    from ops.ssh import connect_stack

    script_args = remainder_argv(c.remainder, sys.argv)  # keeps "a b" one argument
    with user_errors(), connect_stack(stack) as connector:
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
        "source": "local file or directory (a directory sends its contents)",
        "target": "remote path (~/ is the login's home)",
        "stack": _STACK_HELP,
        "all": "send to every node, not only the head",
        "all-nodes": "the same as --all, as `ray rsync-up` names it",
    },
    klass=_long_only("all_nodes"),
)
def rsync_up(c, source, target, stack=None, all=False, all_nodes=False):  # noqa: A002
    """Send changed files to the head or --all nodes (rsync_exclude, rsync_filter)."""
    from ops.errors import user_errors
    from ops.sync import rsync_up_stack

    with user_errors():
        rsync_up_stack(stack, {target: source}, all_nodes=all or all_nodes)


@task(help={"stack": _STACK_HELP})
def file_mounts(c, stack=None):
    """Sync the cluster YAML's file_mounts to every node."""
    from ops.errors import user_errors
    from ops.sync import rsync_up_stack

    with user_errors():
        rsync_up_stack(stack, None, all_nodes=True)


@task(
    help={
        "source": "remote file or directory on the head",
        "target": "local path",
        "stack": _STACK_HELP,
    }
)
def rsync_down(c, source, target, stack=None):
    """Fetch changed files from the head, honouring rsync_exclude and rsync_filter."""
    from pathlib import Path

    from ops.cluster_file import rsync_excludes, rsync_filters
    from ops.errors import user_errors
    from ops.ssh import connect_stack
    from ops.sync import sync_down

    with user_errors(), connect_stack(stack) as connector:
        excludes, filters = rsync_excludes(connector.outputs), rsync_filters(connector.outputs)
        sftp = connector.head().open_sftp()
        try:
            report = sync_down(sftp, source, Path(target), excludes, filters)
        finally:
            sftp.close()
        print(report.summary())


@task(help={"stack": _STACK_HELP})
def status(c, stack=None):
    """Nodes of the stack (type, kind, state, IPs), each node's applied startup script version
    and bootstrap stage, and `ray status`; a head stopped by autostop is said so."""
    from ops.bootstrap_status import bootstrap_table, read_nodes
    from ops.errors import OpsError, user_errors
    from ops.ssh import connect_stack
    from ops.status import head_stopped_note, nodes_table, ray_status

    with user_errors(), connect_stack(stack) as connector:
        print(nodes_table(connector.outputs), flush=True)
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
        "stack": _STACK_HELP,
        "output": "file to write (default: .ray-gcp/<stack>/ssh_config)",
    }
)
def ssh_config(c, stack=None, output=None):
    """Write an ssh Host block for the head to Include."""
    from pathlib import Path

    from ops.errors import user_errors
    from ops.ssh import connect_stack
    from ops.ssh_config import host_alias, write_ssh_config

    with user_errors(), connect_stack(stack) as connector:
        connector.head()  # pins the head's host key, so the block can say StrictHostKeyChecking
        path = write_ssh_config(
            connector.outputs, connector.known_hosts, Path(output) if output else None
        )
    print(f"wrote {path}: add `Include {path.resolve()}` to ~/.ssh/config, then "
          f"`ssh {host_alias(connector.outputs)}`")


# ---------------------------------------------------------------- scale (issue 6)


@task(help={
    "stack": "stack name, e.g. full (stacks/Pulumi.<stack>.yaml)",
    "type": "worker node type from available_node_types, e.g. ray_worker_small",
    "count": "desired number of workers of that type, within its [min_workers, max_workers]",
})
def scale(c, stack, type, count):  # noqa: A002 - `--type` is the documented flag
    """Set a worker type's count in the stack config, then run `pulumi up`."""
    from invoke.exceptions import Exit

    from ops.scale import ScaleError, pulumi_up_command, set_worker_count

    if not str(count).isdigit():
        raise Exit(f"scale: --count must be a whole number, got {count!r}", code=1)
    try:
        path = set_worker_count(stack, type, int(count))
        print(f"{type}: count {count} written to {path}")
        command = pulumi_up_command(stack)
    except ScaleError as exc:
        raise Exit(f"scale: {exc}", code=1) from None
    c.run(command, pty=True)


# --- offline plan and diff for reviews (issue 4): the logic lives in ops/plan*.py -------------

_PLAN_STACK_HELP = "stack to plan (default: $PULUMI_STACK)"


@task(
    help={
        "stack": _PLAN_STACK_HELP,
        "out": "write to this file instead of stdout",
        "format": "json (canonical, byte-identical for the same input) or table",
        "root": "directory holding the stacks/ to plan (default: this checkout)",
    }
)
def plan(c, stack=None, out=None, format="json", root=None):  # noqa: A002
    """Offline plan (no cloud, no pulumi CLI): every resource the program would register."""
    from pathlib import Path

    from infra.stack_config import PROJECT_ROOT
    from ops.errors import user_errors
    from ops.plan import plan_stack, render, stack_or_env

    with user_errors():
        planned = plan_stack(stack_or_env(stack), Path(root) if root else PROJECT_ROOT)
        text = render(planned, format)
        if out:
            Path(out).write_text(text)
        else:
            print(text, end="")


@task(
    help={
        "stack": _PLAN_STACK_HELP,
        "base": "git ref whose tree (program and stacks) is the 'before' side, e.g. "
                "origin/main",
        "out": "write the Markdown to this file instead of stdout",
    }
)
def diff(c, base, stack=None, out=None):
    """Markdown diff of the offline plans at --base (that tree's own program and stacks)
    and of the working tree, for PRs."""
    from pathlib import Path

    from ops.errors import user_errors
    from ops.plan import stack_or_env
    from ops.plan_base import diff_stack_markdown

    with user_errors():
        text = diff_stack_markdown(stack_or_env(stack), base)
        if out:
            Path(out).write_text(text)
        else:
            print(text, end="")


@task(help={"base": "git ref to compare the working tree against"})
def changed_stacks(c, base):
    """Stacks whose plan may differ from --base, one per line (for CI): every stack when the
    program (infra/, bootstrap/, ops/plan*.py, pyproject.toml) changed, else those whose stack
    file or cluster YAML changed."""
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
    """Start a two-node Ray cluster here through the rendered startup scripts, run a task on
    each node, then tear it down (the main-job demo)."""
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
    """Stop the local cluster a `local-up --keep` left running (only its own processes)."""
    from bootstrap.local_cluster import local_down as stop_local_cluster

    stop_local_cluster(print)


# --- the rest of `ray`'s cluster verbs (issue 13): the logic lives in ops/ ------------------
# Their only short flags are these, each with one meaning in every task (as `ray` spells them).
_VERB_SHORT_FLAGS = {"stack": "s", "yes": "y", "output": "o"}


class _VerbTask(Task):
    """A task whose short flags come from _VERB_SHORT_FLAGS, not from first letters."""

    def arg_opts(self, name: str, default: object, taken_names: set[str]) -> dict:
        opts = super().arg_opts(name, default, taken_names)
        short = _VERB_SHORT_FLAGS.get(name)
        opts["names"] = opts["names"][:1] + ([short] if short and short not in taken_names else [])
        return opts


@task(klass=_VerbTask, help={
    "stack": _STACK_HELP,
    "port": "local port to forward (default 8265; the next free one if busy; 0: any)",
    "remote-port": "the dashboard's port on the head (default 8265)",
})
def dashboard(c, stack=None, port=8265, remote_port=8265):
    """Forward the head's Ray dashboard to this machine and print its URL (Ctrl-C stops)."""
    import threading

    from ops.dashboard import forward_dashboard
    from ops.errors import user_errors
    from ops.ssh import connect_stack

    with user_errors(), connect_stack(stack) as connector:
        forward = forward_dashboard(connector, int(port), int(remote_port))
        print(f"dashboard: http://127.0.0.1:{forward.local_port} (Ctrl-C stops)", flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print("stopped")
        finally:
            forward.close()


@task(klass=_VerbTask,
      help={"stack": _STACK_HELP, "internal": "print the internal IP, not the external one"})
def get_head_ip(c, stack=None, internal=False):
    """Print the head's IP (external unless --internal), for scripts."""
    from ops.cluster_ips import head_ip
    from ops.errors import user_errors
    from ops.stack_outputs import load_outputs

    with user_errors():
        print(head_ip(load_outputs(stack), internal))


@task(klass=_VerbTask,
      help={"stack": _STACK_HELP, "internal": "print internal IPs, not external ones"})
def get_worker_ips(c, stack=None, internal=False):
    """Print each worker's IP, one a line (external, or internal where a node has none)."""
    from ops.cluster_ips import worker_ips
    from ops.errors import user_errors
    from ops.stack_outputs import load_outputs

    with user_errors():
        for ip in worker_ips(load_outputs(stack), internal):
            print(ip)


@task(klass=_VerbTask,
      help={"stack": _STACK_HELP, "lines": "number of lines to show first (default 100)"})
def monitor(c, stack=None, lines=100):
    """Follow the autoscaler's log on the head (monitor.*), as `ray monitor` does."""
    from ops.errors import exit_status, user_errors
    from ops.monitor import monitor as follow_monitor
    from ops.ssh import connect_stack

    with user_errors(), connect_stack(stack) as connector:
        status = follow_monitor(connector, int(lines))
    exit_status(status)


@task(klass=_VerbTask, help={
    "stack": _STACK_HELP,
    "output": "archive to write (default collected_logs_<date>_<time>.tar.gz)",
    "logs": "the session's Ray logs (default on; --no-logs skips them)",
    "debug-state": "Ray's debug_state*.txt (default on; part of the logs)",
    "pip": "`pip freeze` of each node (default on)",
    "processes": "the process list of each node (default on)",
    "processes-verbose": "the full command lines in it (default on)",
})
def cluster_dump(c, stack=None, output=None, logs=True, debug_state=True, pip=True,
                 processes=True, processes_verbose=True):
    """Collect Ray's logs and debug state from every node into one local archive."""
    from pathlib import Path

    from ops.cluster_dump import DumpParts, default_output
    from ops.cluster_dump import cluster_dump as dump
    from ops.errors import user_errors
    from ops.ssh import connect_stack

    parts = DumpParts(logs, debug_state, pip, processes, processes_verbose)
    with user_errors(), connect_stack(stack) as connector:
        archive, failed = dump(connector, Path(output) if output else default_output(), parts)
    for line in failed:
        print(f"warning: not in the archive: {line}")
    print(f"wrote {archive}")


@task(klass=_VerbTask, help={
    "stack": _STACK_HELP,
    "yes": "do not ask for confirmation",
    "hard": "delete the instance through the API instead of `ray stop` on it",
})
def kill_random_node(c, stack=None, yes=False, hard=False):
    """Stop Ray on a random worker (`ray stop`), for failure drills; asks first."""
    from ops.errors import user_errors
    from ops.kill_node import kill_random_node as kill
    from ops.ssh import connect_stack

    with user_errors(), connect_stack(stack) as connector:
        node = kill(connector, yes, hard)
    if node is not None:
        print(f"Killed node with IP {node.internal_ip}")


# ---------------------------------------------------------------- capacity (issue 12)


@task(help={"stack": _STACK_HELP})
def preflight(c, stack=None):
    """The cluster at its largest (head + every type's max_workers) against the region's
    Compute quotas, as a table; creates nothing, exits 1 when a quota is short."""
    from invoke.exceptions import Exit

    from infra.config import load_cluster_config
    from infra.stack_config import cluster_path_for_stack
    from ops import preflight as quota_preflight
    from ops.errors import user_errors
    from ops.plan import stack_or_env

    with user_errors():
        config = load_cluster_config(cluster_path_for_stack(stack_or_env(stack)))
        report = quota_preflight.preflight(config)
        print(quota_preflight.render(report))
    if report.short:
        raise Exit(code=1)


# ---------------------------------------------------------------- autostop and cost (issue 14)


@task(help={
    "stack": _STACK_HELP,
    "minutes": "idle minutes after which the head stops every node of the cluster",
    "down": "delete the nodes instead of stopping them",
    "cancel": "turn autostop off",
})
def autostop(c, stack=None, minutes=None, down=False, cancel=False):
    """Change a running cluster's autostop (no node is recreated): --minutes N [--down] or
    --cancel."""
    from ops.autostop import parse_request, set_autostop
    from ops.errors import user_errors
    from ops.ssh import connect_stack

    with user_errors():
        idle_minutes = parse_request(minutes, down, cancel)
        with connect_stack(stack) as connector:
            print(set_autostop(connector, idle_minutes, down))


@task(help={"stack": _PLAN_STACK_HELP})
def cost(c, stack=None):
    """What the stack's cluster costs: per node type its hourly price, per node its hours run
    (from the instances' timestamps), the total so far and per hour now."""
    from ops.cost import cost_report, node_costs
    from ops.errors import user_errors
    from ops.plan import cluster_from_settings, stack_or_env, stack_settings

    with user_errors():
        name = stack_or_env(stack)
        config, _ = cluster_from_settings(stack_settings(name))
        print(cost_report(name, config, node_costs(config)), end="")
