"""Work on the nodes over SSH: `invoke attach/exec/submit`, `rsync-up/rsync-down/file-mounts`,
`dashboard`, `monitor` and `ssh-config`.

Owns the SSH connections and pinned host keys (`ssh`: the Connector; `ssh_direct`: paramiko's
side, imported only for a direct connection; `known_hosts`: the pins read as text;
`host_keys`: what GCE publishes), the warm connections (`warm`, the task's side, and
`warm_daemon`, the per-user background process holding one transport per node, over
ops.stacks.background's sockets), the ProxyCommand a tunnelled head is dialled through (`ssh_proxy`,
IAP for a private cluster), your OS Login key and user (`os_login`), running commands in the right
shell or container (`commands`), our EOF on a channel without paramiko's race with its close
(`eof`), what attach, exec and submit do with their flags (`shell`),
tmux/screen sessions and port forwards (`sessions`, `attach`, `dashboard`), work on every
node at once (`fanout`: the stack's nodes and the autoscaler's running workers, `--parallel`
at a time, a line per node that failed, a summary), the
syncs with rsync's filters (`sync_walk`: what to send, filters from model.sync_filter;
one tar stream through the system's ssh (`openssh`) per node, the node's side and the
requests in `tar_session`: up in `tar_stream`, written by `tar_writer`, down in `tar_fetch`,
unpacked by `tar_unpack`, every header read first by `tar_headers`;
`sync`, SFTP and the choice between them; `landing`, where a fetched file, folder or link
lands here; `cluster_file`, `progress`),
what a node sends checked as untrusted data (`untrusted`: names, modes, capped output; also
used by ops.cloud's cluster dump),
the autoscaler log (`monitor`), the ssh config block (`ssh_config`) and Ray's token auth
for the commands and the dashboard (`ray_auth`). Light on purpose:
`invoke exec` must start fast, so pulumi and pydantic stay out of its imports, and so does
paramiko when a warm connection serves it.
May import `model`, `infra`, `bootstrap`, the shared top of `ops` and `ops.stacks` (the stack,
the autoscaler's workers, the background processes); no other room (ops.cloud imports this
one). Verbs:
`connect_stack`, `attach`, `exec_command`, `submit`, `rsync_up`, `rsync_down`,
`rsync_up_stack`, `serve_dashboard`, `monitor_stack`, `stack_ssh_config`.
"""
