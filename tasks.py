"""invoke tasks: what users type. Each task parses its flags and calls one verb of an ops room
(ops/lifecycle, ops/remote, ops/cloud, ops/review; bootstrap/ for the local cluster), so tests
call the verbs directly. One file: invoke's `--list` groups and the flag tests read it whole."""

from __future__ import annotations

import sys

# invoke turns off writing bytecode before it loads this file; a task imports ops/ and, for
# some, Google's client libraries, which would then be compiled again on every run (0.1 s
# for `rsync-up`, seconds for `status`). __pycache__ is git-ignored.
sys.dont_write_bytecode = False

# The task's heap (pulumi, pydantic, Google's clients) is not walked once more at exit.
from model.quick_exit import skip_the_last_collection  # noqa: E402

skip_the_last_collection()

# invoke's @task with one short-flag vocabulary (docs/day-two.md: Flags); imported after the line
# above, so ops/ is cached too
from ops.task_flags import task  # noqa: E402
from ops.task_groups import list_in_groups  # noqa: E402

# --- lifecycle (ops/lifecycle) and day two over SSH (ops/remote) -----------------------------
# ops modules are imported inside the tasks: `invoke exec` should not pay for pulumi's import.

_STACK_HELP = ("the cluster's stack, named after its cluster_name (default: $PULUMI_STACK, else "
               "the only stack of this folder; never pulumi's selected stack)")
_TRUST_HELP = ("when GCE publishes no host key for a node (a TPU VM, an agent that has not "
               "written them yet), accept the key it offers once and pin it, instead of "
               "refusing")


_CONFIG_HELP = ("a Ray cluster YAML instead of --stack: its stack is named after its "
                "cluster_name (`up`/`preview` write .ray-gcp/stacks/Pulumi.<NAME>.yaml here and "
                "create the stack on first use; docs/getting-started.md)")
_YES_HELP = ("accepted as `ray {} -y` users type it; changes nothing: this task never asks "
             "(`invoke preview` shows the change)")
_DELETE_YES_HELP = ("do not ask before deleting (without a terminal to ask on, this flag is "
                    "required)")
_DAY_TWO_CONFIG_HELP = "a Ray cluster YAML instead of --stack: the stack `up -c` made for it"
_WAIT_HELP = ("when another run holds the stack's lock, wait for it (alone: up to 30 minutes; "
              "or --wait=DURATION, e.g. 90s, 10m, 1h) instead of ending; says who holds it")


def _named(stack: str | None, config: str | None) -> str | None:
    """The stack a day-two task's --stack or --config names (None: neither, the folder's only
    stack is chosen later)."""
    if not config:
        return stack
    from ops.errors import OpsError, user_errors
    from ops.stacks.stack import stack_for_cluster_yaml

    with user_errors():
        if stack:
            raise OpsError(f"--stack {stack} and --config {config} both choose the stack: "
                           "give one")
        found = stack_for_cluster_yaml(config)
        if not found.exists:
            raise OpsError(f"{config}: no stack deploys it yet (stack {found.name!r}): "
                           f"`up -c {config}` creates it")
        return found.name


def _lifecycle(stack: str | None, operation: str, config: str | None,
               wait: object = None) -> None:
    from ops.errors import user_errors
    from ops.lifecycle.lock_wait import lock_wait, wait_seconds
    from ops.lifecycle.pulumi_cli import operate

    with user_errors(), lock_wait(wait_seconds(wait)):
        operate(stack, operation, config)


@task(optional=["wait"], help={
    "stack": _STACK_HELP,
    "config": _CONFIG_HELP,
    "restart-only": "running nodes restart Ray without rerunning setup",
    "no-restart": "running nodes rerun changed setup without restarting Ray",
    "yes": _YES_HELP.format("up"),
    "wait": _WAIT_HELP,
})
def up(c, stack=None, config=None, restart_only=False, no_restart=False, yes=False, wait=None):
    """Create or update the cluster (refresh, then pulumi up).

    With live progress; preempted TPU slices are replaced, and running nodes re-apply a
    changed startup script themselves. `invoke up -c my-cluster.yaml` takes a Ray cluster
    YAML as `ray up` does."""
    from ops.errors import user_errors
    from ops.lifecycle.lock_wait import lock_wait, wait_seconds
    from ops.lifecycle.pulumi_cli import up as up_stack

    with user_errors(), lock_wait(wait_seconds(wait)):
        up_stack(stack, restart_only, no_restart, config)


@task(help={
    "stack": _STACK_HELP,
    "config": _CONFIG_HELP,
    "diff": "print the engine's own `pulumi preview --diff` text (what a PR reviewer reads) "
            "instead of a line per step",
})
def preview(c, stack=None, config=None, diff=False):
    """Show what `invoke up` would create, change or delete."""
    if not diff:
        _lifecycle(stack, "preview", config)
        return
    from ops.errors import user_errors
    from ops.lifecycle.pulumi_cli import preview_diff

    with user_errors():
        preview_diff(stack, config)


@task(optional=["wait"], help={
    "stack": _STACK_HELP,
    "config": _CONFIG_HELP,
    "workers-only": "only delete the workers (groups, TPU slices, the autoscaler's); keep the head",
    "keep-min-workers": "with --workers-only: keep each type's min_workers (scale down to it)",
    "yes": _DELETE_YES_HELP,
    "wait": _WAIT_HELP,
})
def down(c, stack=None, config=None, workers_only=False, keep_min_workers=False, yes=False,
         wait=None):
    """Delete the cluster (pulumi destroy), or only its workers.

    Says what it deletes (cluster, project, zones, nodes, resources) and asks first, as `ray
    down` does; -y skips the question."""
    from ops.errors import user_errors
    from ops.lifecycle.down_workers import down as down_stack
    from ops.lifecycle.lock_wait import lock_wait, wait_seconds

    with user_errors(), lock_wait(wait_seconds(wait)):
        down_stack(stack, workers_only, keep_min_workers, config, yes)


@task(help={
    "config": "the Ray cluster YAML you gave `ray up` (its stack is named after cluster_name)",
    "yes": "do not ask before taking the cluster over (without a terminal, this flag is "
           "required)",
})
def adopt(c, config, yes=False):
    """Take a running `ray up` cluster into a new stack as it is.

    Finds it by Ray's labels in the YAML's project and zone, says what it takes over (head,
    workers, Ray's account and roles, SSH key, firewall rules) and what it cannot, previews
    (nothing replaced or deleted), asks, then imports (README: Coming from `ray up`)."""
    from ops.adopt.run import adopt as adopt_cluster
    from ops.errors import user_errors

    with user_errors():
        adopt_cluster(config, yes)


@task(optional=["wait"], help={"stack": _STACK_HELP, "config": _CONFIG_HELP, "wait": _WAIT_HELP})
def refresh(c, stack=None, config=None, wait=None):
    """Reconcile the stack's state with what exists in GCP."""
    _lifecycle(stack, "refresh", config, wait)


@task(help={"stack": _STACK_HELP, "config": _DAY_TWO_CONFIG_HELP})
def unlock(c, stack=None, config=None):
    """Clear the stack's lock a killed run left behind.

    Shows who held it since when; refuses while that run still goes on on this machine
    (README: Working as a team)."""
    from ops.errors import user_errors
    from ops.lifecycle.locks import unlock as unlock_stack
    from ops.stacks.stack import resolve_stack_name

    with user_errors():
        unlock_stack(resolve_stack_name(_named(stack, config)), sys.stdout)


@task(help={"stack": "the cluster's stack (with --delete it must be named, here or by -c)",
            "config": _DAY_TWO_CONFIG_HELP,
            "delete": "delete the orphans the list shows (asks first)",
            "yes": _DELETE_YES_HELP})
def orphans(c, stack=None, config=None, delete=False, yes=False):
    """Cloud resources of the cluster its state does not know.

    Instances, TPU nodes, firewall rules, the worker account and the bucket left by a killed
    run, a lost state or made by hand, one line each; --delete deletes them after asking
    (README: Working as a team)."""
    from ops.cloud.orphans import show_orphans
    from ops.errors import user_errors

    with user_errors():
        show_orphans(_named(stack, config), delete, yes, sys.stdout)


@task(help={"bucket": "the bucket's name, e.g. acme-ray-state",
            "project": "the project to make it in",
            "location": "where (default US; a region such as us-west1 keeps it near you)"})
def state_bucket(c, bucket, project, location="US"):
    """Make the bucket a team keeps its stacks' state in.

    Versioning on, uniform bucket-level access, public access prevention; prints the
    PULUMI_BACKEND_URL to set and the role each teammate needs (README: Working as a team)."""
    from ops.errors import user_errors
    from ops.lifecycle.state_bucket import StateBucket

    with user_errors():
        print(StateBucket(bucket, "").create(project, location))
        print(f"every teammate: export PULUMI_BACKEND_URL=gs://{bucket} (and one shared "
              "PULUMI_CONFIG_PASSPHRASE); grant each roles/storage.objectUser on the bucket: "
              f"gcloud storage buckets add-iam-policy-binding gs://{bucket} "
              "--member=user:EMAIL --role=roles/storage.objectUser")


@task
def engine(c):
    """Build and install the pinned pulumi CLI, once.

    From the Go module proxy (engine/go.mod) into ~/.cache/ray-gcp-pulumi/engine/<version>/bin
    (or $XDG_CACHE_HOME's), with the plugin the engine runs dynamic providers with; prints
    that folder last. The lifecycle tasks use it, else `pulumi` on PATH."""
    from ops.engine import install_engine
    from ops.errors import user_errors

    with user_errors():
        print(install_engine())


@task(
    help={
        "stack": _STACK_HELP, "config": _DAY_TWO_CONFIG_HELP,
        "tmux": "attach to (or start) the tmux session `ray`",
        "screen": "attach to (or start) the screen session `ray`",
        "port-forward": "PORT[:REMOTE] forward local PORT to the node's REMOTE port (default "
                        "the same), e.g. -p 8265; repeatable",
        "node": "attach to this worker (reached through the head) instead of the head",
        "new": "with --tmux/--screen: start a new session instead of the shared `ray` one",
        "trust-first-use": _TRUST_HELP,
    },
    iterable=["port_forward"],
)
def attach(c, stack=None, config=None, tmux=False, screen=False, port_forward=None, node=None,
           new=False, trust_first_use=False):
    """A shell on the head (or --node), with port forwards."""
    from ops.errors import exit_status, user_errors
    from ops.remote.shell import attach as attach_shell

    with user_errors():
        status = attach_shell(_named(stack, config), tmux, screen, port_forward, node, new,
                              trust_first_use)
    exit_status(status)


@task(
    name="exec",
    help={
        "cmd": "shell command to run (quote it)",
        "stack": _STACK_HELP, "config": _DAY_TWO_CONFIG_HELP,
        "all-nodes": "run on every node in parallel, output prefixed by node; a line per node "
                     "that failed and a summary",
        "parallel": "with --all-nodes: nodes worked on at once (default 10, sshd's MaxStartups)",
        "out": "with --all-nodes: write each node's output to DIR/NODE.out and DIR/NODE.err",
        "node": "run on this node instead of the head",
        "docker": "run inside the cluster's docker container",
        "login": "always run in a login shell like Ray (default: only if `ray` needs one)",
        "tmux": "run it detached in a window of the tmux session `ray` (see `attach --tmux`)",
        "screen": "run it detached in a window of the screen session `ray`",
        "port-forward": "PORT[:REMOTE] forward local PORT to the node while it runs; "
                        "repeatable",
        "trust-first-use": _TRUST_HELP,
    },
    iterable=["port_forward"],
)
def exec_(c, cmd, stack=None, config=None, all_nodes=False, node=None, docker=False, login=False,
          tmux=False, screen=False, port_forward=None, trust_first_use=False, parallel=None,
          out=None):
    """Run a command on the head or every node, with its status."""
    from ops.errors import exit_status, user_errors
    from ops.remote.shell import exec_command

    with user_errors():
        status = exec_command(_named(stack, config), cmd, all_nodes, node, docker, login, tmux,
                              screen, port_forward, trust_first_use, parallel, out)
    exit_status(status)


@task(
    help={
        "script": "local Python script; arguments for it go after `--`",
        "stack": _STACK_HELP, "config": _DAY_TWO_CONFIG_HELP,
        "docker": "run it inside the cluster's docker container",
        "login": "always run in a login shell like Ray (default: only if `ray` needs one)",
        "tmux": "run it detached in a window of the tmux session `ray` (see `attach --tmux`)",
        "screen": "run it detached in a window of the screen session `ray`",
        "port-forward": "PORT[:REMOTE] forward local PORT to the head while it runs; "
                        "repeatable",
        "args": "the script's arguments as one string (Ray's deprecated form of `-- ARGS`)",
        "trust-first-use": _TRUST_HELP,
    },
    iterable=["port_forward"],
)
def submit(c, script, stack=None, config=None, docker=False, login=False, tmux=False, screen=False,
           port_forward=None, args=None, trust_first_use=False):
    """Upload a Python script and run it on the head.

    Arguments for the script go after `--`: `invoke submit train.py -- --epochs 3`."""
    import sys

    from ops.errors import exit_status, user_errors
    from ops.remote.shell import submit as submit_script

    with user_errors():
        status = submit_script(_named(stack, config), script, c.remainder, sys.argv, args,
                               docker, login, tmux, screen, port_forward, trust_first_use)
    exit_status(status)


@task(
    help={
        "source": "local file or directory (a directory sends its contents)",
        "target": "remote path (~/ is the login's home)",
        "stack": _STACK_HELP, "config": _DAY_TWO_CONFIG_HELP,
        "all-nodes": "send to every node, not only the head; a line per node that failed and "
                     "a summary",
        "parallel": "with --all-nodes: nodes sent to at once (default 10, sshd's MaxStartups)",
        "checksum": "skip files by size and content (SHA-256, rsync's -c), not size and mtime",
        "copy-links": "send what a link leading outside SOURCE names (rsync's --copy-links); "
                      "without it such a link is left out, named",
        "trust-first-use": _TRUST_HELP,
    }
)
def rsync_up(c, source, target, stack=None, config=None, all_nodes=False, checksum=False,
             copy_links=False, trust_first_use=False, parallel=None):
    """Send changed files to the head (or every node).

    Files matching the cluster YAML's rsync_exclude or its rsync_filter files are skipped;
    unchanged files (same size and mtime, or with --checksum the same content) too."""
    from ops.errors import exit_status, user_errors
    from ops.remote.sync import rsync_up as send

    with user_errors():
        status = send(_named(stack, config), source, target, all_nodes, trust_first_use,
                      checksum, copy_links, parallel)
    exit_status(status)


@task(help={"stack": _STACK_HELP, "config": _DAY_TWO_CONFIG_HELP, "trust-first-use": _TRUST_HELP,
            "parallel": "nodes sent to at once (default 10, sshd's MaxStartups)"})
def file_mounts(c, stack=None, config=None, trust_first_use=False, parallel=None):
    """Sync the cluster YAML's file_mounts to every node."""
    from ops.errors import exit_status, user_errors
    from ops.remote.sync import rsync_up_stack

    with user_errors():
        status = rsync_up_stack(_named(stack, config), None, all_nodes=True,
                                trust_first_use=trust_first_use, parallel=parallel)
    exit_status(status)


@task(
    help={
        "source": "remote file or directory on the head",
        "target": "local path",
        "stack": _STACK_HELP, "config": _DAY_TWO_CONFIG_HELP,
        "trust-first-use": _TRUST_HELP,
    }
)
def rsync_down(c, source, target, stack=None, config=None, trust_first_use=False):
    """Fetch changed files from the head.

    Files matching the cluster YAML's rsync_exclude or its rsync_filter files are skipped."""
    from ops.errors import user_errors
    from ops.remote.sync import rsync_down as fetch

    with user_errors():
        fetch(_named(stack, config), source, target, trust_first_use)


@task(help={"stack": _STACK_HELP, "config": _DAY_TWO_CONFIG_HELP, "trust-first-use": _TRUST_HELP,
            "json": "print the nodes and what waits for capacity as JSON (no SSH)"})
def status(c, stack=None, config=None, trust_first_use=False, json=False):  # noqa: A002
    """The stack's nodes, their script versions, `ray status`.

    Nodes with type, kind, state and IPs; which were preempted and when, or vanished (the
    Compute/TPU API); what waits for capacity (flex-start, queued TPU requests) and which nodes
    end when; each node's applied startup script version and bootstrap stage; a head stopped
    by autostop is said so. `--json`: the nodes and capacity as JSON, from the APIs only."""
    from ops.errors import user_errors

    with user_errors():
        if json:
            from ops.cloud.capacity_status import status_json

            print(status_json(_named(stack, config)))
            return
        from ops.cloud.status import show_status

        show_status(_named(stack, config), trust_first_use)


@task(
    help={
        "stack": _STACK_HELP, "config": _DAY_TWO_CONFIG_HELP,
        "output": "file to write (default: .ray-gcp/<stack>/ssh_config)",
        "trust-first-use": _TRUST_HELP,
    }
)
def ssh_config(c, stack=None, config=None, output=None, trust_first_use=False):
    """Write an ssh Host block for the head to Include."""
    from ops.errors import user_errors
    from ops.remote.ssh_config import stack_ssh_config

    with user_errors():
        message = stack_ssh_config(_named(stack, config), output, trust_first_use)
    print(message)


# ---------------------------------------------------------------- scale (ops/lifecycle)


@task(help={
    "stack": _STACK_HELP,
    "config": _DAY_TWO_CONFIG_HELP,
    "type": "worker node type from available_node_types, e.g. ray_worker_small",
    "count": "desired number of workers of that type, within its [min_workers, max_workers]",
    "yes": _DELETE_YES_HELP,
    "wait": _WAIT_HELP,
}, optional=["wait"])
def scale(c, type, count, stack=None, config=None, yes=False, wait=None):  # noqa: A002
    """Set a worker type's count, then run `pulumi up`.

    The count is written under `ray-gcp:workerCounts` in the stack file; the up runs as
    `invoke up` does (refresh first, progress as it goes). Fewer workers than now: asks first
    unless -y."""
    from ops.errors import user_errors
    from ops.lifecycle.lock_wait import lock_wait, wait_seconds
    from ops.lifecycle.scale import scale as scale_stack

    with user_errors(), lock_wait(wait_seconds(wait)):
        scale_stack(_named(stack, config), type, count, yes)


# --- offline plan and diff for reviews: ops/review ---------------------------------------------

@task(
    help={
        "stack": _STACK_HELP,
        "config": "a Ray cluster YAML instead of --stack: planned as the stack `invoke up -c` "
                  "would deploy it as (nothing is written)",
        "output": "write to this file instead of stdout",
        "format": "table (default: node types, prices, resources, warnings) or json (the "
                  "canonical document, byte-identical for the same input, for tools; the "
                  "default for an --output named *.json)",
        "json": "the same as --format json",
        "root": "directory holding the stacks/ to plan (default: this checkout)",
    }
)
def plan(c, stack=None, config=None, output=None, format=None, json=False,  # noqa: A002
         root=None):
    """Offline plan: every resource the program would register.

    Runs the real program under a mock engine: no cloud, no pulumi CLI; writes nothing."""
    from ops.errors import user_errors
    from ops.review.plan import plan_format, write_plan

    with user_errors():
        write_plan(stack, output, plan_format(format, json, output), root, config)


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
    from ops.review.plan_base import write_diff

    with user_errors():
        write_diff(stack, base, output)


@task(help={"base": "git ref to compare the working tree against"})
def changed_stacks(c, base):
    """Stacks whose plan may differ from --base (for CI).

    Every stack when the program (model/, infra/, bootstrap/, ops/review/, policy/,
    ops/stacks/stack.py, pyproject.toml) changed, else those whose stack file or cluster YAML
    changed."""
    from ops.errors import user_errors
    from ops.review.plan_base import changed_stacks as find_changed

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
    from bootstrap.local_cluster import DEFAULT_CONFIG, try_local_cluster
    from model.config import load_cluster_config
    from ops.errors import user_errors

    with user_errors():
        try_local_cluster(load_cluster_config(config or DEFAULT_CONFIG), keep, print)


@task
def local_down(c):
    """Stop every local cluster `local-up --keep` left running."""
    from bootstrap.local_cluster import local_down as stop_local_cluster
    from ops.errors import user_errors

    with user_errors():
        stop_local_cluster(print)


# --- the rest of `ray`'s cluster verbs: ops/remote and ops/cloud --------------------------


@task(help={
    "stack": _STACK_HELP,
    "config": _DAY_TWO_CONFIG_HELP,
    "port": "local port to forward (default 8265; the next free one if busy; 0: any)",
    "remote-port": "the dashboard's port on the head (default 8265)",
    "trust-first-use": _TRUST_HELP,
    "show-token": "also print Ray's auth token (the page asks for it; default: only its file)",
})
def dashboard(c, stack=None, config=None, port=8265, remote_port=8265, trust_first_use=False,
              show_token=False):
    """Forward the head's Ray dashboard here and print its URL.

    With Ray's token auth, also where the token is and how to submit jobs with it. Runs until
    Ctrl-C."""
    from ops.errors import user_errors
    from ops.remote.dashboard import serve_dashboard

    with user_errors():
        serve_dashboard(_named(stack, config), int(port), int(remote_port), trust_first_use,
                        show_token)


@task(help={"stack": _STACK_HELP, "config": _DAY_TWO_CONFIG_HELP,
            "internal": "print the internal IP, not the external one"})
def get_head_ip(c, stack=None, config=None, internal=False):
    """Print the head's IP, for scripts.

    External unless --internal."""
    from ops.cloud.cluster_ips import head_ip
    from ops.errors import user_errors
    from ops.stacks.stack import load_outputs

    with user_errors():
        print(head_ip(load_outputs(_named(stack, config)), internal))


@task(help={"stack": _STACK_HELP, "config": _DAY_TWO_CONFIG_HELP,
            "internal": "print internal IPs, not external ones"})
def get_worker_ips(c, stack=None, config=None, internal=False):
    """Print each worker's IP, one a line.

    External, or internal where a node has none (or with --internal)."""
    from ops.cloud.cluster_ips import worker_ips
    from ops.errors import user_errors
    from ops.stacks.stack import load_outputs

    with user_errors():
        for ip in worker_ips(load_outputs(_named(stack, config)), internal):
            print(ip)


@task(help={"stack": _STACK_HELP, "config": _DAY_TWO_CONFIG_HELP,
            "lines": "number of lines to show first (default 100)",
            "trust-first-use": _TRUST_HELP})
def monitor(c, stack=None, config=None, lines=100, trust_first_use=False):
    """Follow the autoscaler's log on the head.

    The head's monitor.* logs, as `ray monitor` follows them."""
    from ops.errors import exit_status, user_errors
    from ops.remote.monitor import monitor_stack

    with user_errors():
        status = monitor_stack(_named(stack, config), int(lines), trust_first_use)
    exit_status(status)


@task(help={
    "stack": _STACK_HELP,
    "config": _DAY_TWO_CONFIG_HELP,
    "output": "archive to write (default collected_logs_<date>_<time>.tar.gz)",
    "logs": "the session's Ray logs (default on; --no-logs skips them)",
    "debug-state": "Ray's debug_state*.txt (default on; part of the logs)",
    "pip": "`pip freeze` of each node (default on)",
    "processes": "the process list of each node (default on)",
    "processes-verbose": "the full command lines in it (default on)",
    "trust-first-use": _TRUST_HELP,
})
def cluster_dump(c, stack=None, config=None, output=None, logs=True, debug_state=True, pip=True,
                 processes=True, processes_verbose=True, trust_first_use=False):
    """Collect every node's Ray logs into one local archive.

    Ray's logs, debug state, `pip freeze` and processes, with a progress bar."""
    from ops.cloud.cluster_dump import DumpParts, dump_stack
    from ops.errors import user_errors

    with user_errors():
        dump_stack(_named(stack, config), output,
                   DumpParts(logs, debug_state, pip, processes, processes_verbose),
                   trust_first_use)


@task(help={
    "stack": _STACK_HELP,
    "config": _DAY_TWO_CONFIG_HELP,
    "yes": "do not ask for confirmation",
    "hard": "delete the instance through the API instead of `ray stop` on it",
    "trust-first-use": _TRUST_HELP,
})
def kill_random_node(c, stack=None, config=None, yes=False, hard=False, trust_first_use=False):
    """Stop Ray on a random worker, for failure drills.

    `ray stop` on it (--hard: delete its instance); asks first unless --yes."""
    from ops.cloud.kill_node import kill_stack_node
    from ops.errors import user_errors

    with user_errors():
        kill_stack_node(_named(stack, config), yes, hard, trust_first_use)


# ---------------------------------------------------------------- capacity (ops/lifecycle)


@task(help={"stack": _STACK_HELP, "config": _DAY_TWO_CONFIG_HELP})
def preflight(c, stack=None, config=None):
    """Check the largest cluster against the region's quotas.

    The head plus every type at max_workers against the region's Compute quotas and the
    zone's Cloud TPU quotas, as a table; creates nothing, exits 1 when a quota is short.
    Then names the network's firewall rules that admit SSH or Ray's ports more widely than
    the cluster's own, and a private cluster's subnet without Private Google Access."""
    from invoke.exceptions import Exit

    from ops.errors import user_errors
    from ops.lifecycle.preflight import preflight_stack

    with user_errors():
        short = preflight_stack(_named(stack, config))
    if short:
        raise Exit(code=1)


# ---------------------------------------------------------------- autostop and cost (ops/cloud)


@task(help={
    "stack": _STACK_HELP,
    "config": _DAY_TWO_CONFIG_HELP,
    "minutes": "idle minutes after which the head stops every node of the cluster",
    "down": "delete the nodes instead of stopping them",
    "cancel": "turn autostop off",
    "trust-first-use": _TRUST_HELP,
})
def autostop(c, stack=None, config=None, minutes=None, down=False, cancel=False,
             trust_first_use=False):
    """Change a running cluster's autostop.

    --minutes N [--down], or --cancel; no node is recreated."""
    from ops.cloud.autostop import change_autostop
    from ops.errors import user_errors

    with user_errors():
        print(change_autostop(_named(stack, config), minutes, down, cancel, trust_first_use))


@task(help={"stack": _STACK_HELP, "config": _DAY_TWO_CONFIG_HELP})
def cost(c, stack=None, config=None):
    """What the stack's cluster costs, so far and per hour.

    Per node type its hourly price, per node its hours run (from the instances' timestamps),
    the total so far and per hour now."""
    from ops.cloud.cost import stack_cost_report
    from ops.errors import user_errors

    with user_errors():
        print(stack_cost_report(_named(stack, config)), end="")


@task(help={"project": "project whose APIs to read (default: the credentials' own)"})
def catalog_refresh(c, project=None):
    """Refresh the machine/GPU/TPU catalog and list prices.

    Reads the Compute, Cloud TPU and Cloud Billing Catalog APIs with your application-default
    credentials and rewrites model/config/catalog.yaml and model/price_table.yaml, dated."""
    from invoke.exceptions import Exit

    from infra.catalog_refresh import CatalogRefreshError, live_getter, refresh

    try:
        get, own_project = live_getter()
        if not (project or own_project):
            raise CatalogRefreshError("the credentials name no project: pass --project PROJECT")
        for written in refresh(get, project or own_project):
            print(f"wrote {written}")
    except CatalogRefreshError as exc:
        raise Exit(f"catalog-refresh: {exc}", 1) from None


# --- `invoke --list` shows the tasks under these headings, in this order (ops/task_groups.py) ---

TASK_GROUPS = (
    ("Cluster lifecycle", (up, preview, refresh, down, unlock, orphans, scale, autostop,
                           preflight, adopt, state_bucket, engine)),
    ("Nodes and sessions", (attach, exec_, submit, dashboard, get_head_ip, get_worker_ips,
                            ssh_config)),
    ("Files", (rsync_up, rsync_down, file_mounts)),
    ("Health and debugging", (status, monitor, cluster_dump, kill_random_node)),
    ("Plans, review and cost", (plan, diff, changed_stacks, cost, catalog_refresh)),
    ("Local cluster", (local_up, local_down)),
)
list_in_groups(TASK_GROUPS)


def main() -> None:
    """`ray-gcp`, the installed command (`uv tool install .`): these tasks, flags and `--list`
    through invoke's own Program with this module as its collection, run in the user's own
    folder (its `.ray-gcp/` holds the stacks and state)."""
    from importlib.metadata import version

    from invoke import Collection, Program

    Program(namespace=Collection.from_module(sys.modules[__name__]), name="ray-gcp",
            binary="ray-gcp", version=version("ray-gcp-pulumi")).run()
