"""The stack a task works on and what is kept of it between tasks.

Owns which stack a task works on, its file, cluster and outputs, read once and handed down
(`stack`: `Stack`, the engine's workspace and stack files, the stack a cluster YAML names);
a stack's outputs kept in memory by a per-user background process while the file backend's
checkpoint is unchanged (`kept_outputs` asks it, `outputs_keeper` is that process,
`checkpoint` says whether the state changed); the nodes the outputs do not list, the workers
Ray's autoscaler launched, as the Compute API lists them, with the API clients as the stack's
identity and their errors in one line (`cloud_nodes`: for ops.cloud's status and ops.remote's
fan-out, which may not import each other's way back); and what every background process of ours
shares (`background`: idle time, private unix sockets, starting one detached; ops.remote's
warm connections use it too).

May import `model`, `infra` and `bootstrap` (as the program reads a stack) and the shared top
of `ops` (`errors`, `paths`, `engine`); no other room. Every room of ops and `tasks.py` import
it. Verbs: `Stack`, `stack_settings`, `stack_for_cluster_yaml`, `kept_outputs`,
`start_detached`, `autoscaled_nodes`, `api_clients`.
"""
