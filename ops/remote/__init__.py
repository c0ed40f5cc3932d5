"""Work on the nodes over SSH: `invoke attach/exec/submit/rsync-*/file-mounts/dashboard/monitor/
cluster-dump/ssh-config`.

Owns the paramiko connections and pinned host keys (`ssh`, `host_keys`), running commands in
the right shell or container (`commands`), tmux/screen sessions and port forwards (`sessions`,
`attach`, `dashboard`), SFTP sync with rsync's filters (`sync`, `sync_filter`, `cluster_file`,
`progress`), the autoscaler log (`monitor`), the log archive (`cluster_dump`) and the ssh
config block (`ssh_config`). Light on purpose: `invoke exec` must start fast, so pulumi and
pydantic stay out of its imports. May import `infra`, `bootstrap` and the shared top of
`ops`; no other room. Verbs: `connect_stack`, `exec_on_node`, `exec_on_all`, `submit`,
`interactive_shell`, `rsync_up_stack`, `rsync_down_head`, `forward_dashboard`, `monitor`,
`cluster_dump`, `write_ssh_config`.
"""
