# ---- library: the steps every node runs. The renderer prepends the node's data (NODE_*,
# DOCKER_*, RESOURCES_*) and appends the ordered list of steps for this role and node type.
#
# Environment knobs (unset on GCE; set by the local cluster and the tests):
#   RAY_BOOTSTRAP_METADATA_DIR   read metadata attributes from files here, one per key
#   RAY_BOOTSTRAP_HOME           `~` for the commands (local mode: run as the current user)
#   RAY_BOOTSTRAP_LOG            log file (default /var/log/ray-bootstrap.log)
#   RAY_BOOTSTRAP_STATUS_DIR     write the status guest attribute under this directory
#   RAY_BOOTSTRAP_SKIP_RAY_STOP  1: skip `ray stop` (it would stop every Ray on the machine)
#   RAY_HEAD_IP                  the head's address; when set it wins over metadata

METADATA_URL=http://metadata.google.internal/computeMetadata/v1/instance
STATUS_ATTRIBUTE=ray-bootstrap/status
CURRENT_STAGE=none
RUN_AS=
NODE_HOME=
ENV_PREFIX=

log() {
    printf '%s [ray-bootstrap] %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*"
}

is_local() {
    [ -n "${RAY_BOOTSTRAP_METADATA_DIR:-}" ]
}

# Single-quote a value so a shell reads it back unchanged (no expansion, no injection).
quote() {
    printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

# Where `status` reads progress: a guest attribute on GCE, a file in local mode.
report_status() {
    if is_local || [ -n "${RAY_BOOTSTRAP_STATUS_DIR:-}" ]; then
        status_file="${RAY_BOOTSTRAP_STATUS_DIR:-$RAY_BOOTSTRAP_METADATA_DIR/../guest-attributes}/$STATUS_ATTRIBUTE"
        mkdir -p "$(dirname "$status_file")" && printf '%s' "$1" > "$status_file"
    else
        curl -fsS -X PUT --data "$1" -H 'Metadata-Flavor: Google' \
            "$METADATA_URL/guest-attributes/$STATUS_ATTRIBUTE" > /dev/null 2>&1 \
            || log "could not write guest attribute $STATUS_ATTRIBUTE"
    fi
}

begin_stage() {
    CURRENT_STAGE=$1
    log "stage=$CURRENT_STAGE begin"
    report_status "running:$CURRENT_STAGE"
}

fail() {
    log "stage=$CURRENT_STAGE failed exit=$1"
    report_status "failed:$CURRENT_STAGE:$1"
    exit "$1"
}

finish() {
    CURRENT_STAGE=ready
    log "stage=ready"
    report_status ready
}

# Print a metadata attribute; status 1 when the node has no such key.
metadata_attr() {
    if is_local; then
        [ -f "$RAY_BOOTSTRAP_METADATA_DIR/$1" ] && cat "$RAY_BOOTSTRAP_METADATA_DIR/$1"
        return
    fi
    curl -fsS --retry 5 --retry-connrefused -H 'Metadata-Flavor: Google' \
        "$METADATA_URL/attributes/$1" 2> /dev/null
}

# Commands run as auth.ssh_user with `~` = its home; GCE runs this script as root.
prepare_node() {
    if is_local; then
        NODE_HOME=${RAY_BOOTSTRAP_HOME:-$HOME}
        mkdir -p "$NODE_HOME" || fail $?
    elif [ "$(id -u)" = 0 ] && [ "$NODE_SSH_USER" != root ]; then
        if ! id "$NODE_SSH_USER" > /dev/null 2>&1; then
            useradd -m -s /bin/bash "$NODE_SSH_USER" || fail $?
        fi
        printf '%s ALL=(ALL) NOPASSWD:ALL\n' "$NODE_SSH_USER" > /etc/sudoers.d/90-ray-bootstrap
        chmod 0440 /etc/sudoers.d/90-ray-bootstrap
        if getent group docker > /dev/null 2>&1; then
            usermod -aG docker "$NODE_SSH_USER" || true
        fi
        RUN_AS=$NODE_SSH_USER
        NODE_HOME=$(getent passwd "$NODE_SSH_USER" | cut -d: -f6)
    else
        NODE_HOME=$HOME
    fi
    log "node role=$NODE_ROLE type=$NODE_TYPE cluster=$NODE_CLUSTER home=$NODE_HOME"
}

# Hand a file we wrote as root to the user the commands run as.
give_to_user() {
    if [ -n "$RUN_AS" ]; then
        chown "$RUN_AS" "$1"
    fi
}

# `~/x` -> the node home; other paths unchanged.
expand_home() {
    case $1 in
        \~) printf '%s' "$NODE_HOME" ;;
        \~/*) printf '%s/%s' "$NODE_HOME" "${1#\~/}" ;;
        *) printf '%s' "$1" ;;
    esac
}

# With docker, file mounts live under Ray's host mount dir and are bind-mounted into the
# container; without docker they go straight to their path.
mount_path() {
    if [ -n "$DOCKER_IMAGE" ]; then
        printf '%s/%s' "$DOCKER_MOUNT_DIR" "${1#/}"
    else
        expand_home "$1"
    fi
}

# A small file_mounts entry, base64 in metadata key $1, written to remote path $2.
write_file_mount() {
    target=$(mount_path "$2")
    encoded=$(metadata_attr "$1") || {
        log "metadata $1 is missing: file mount $2 cannot be written"
        fail 4
    }
    mkdir -p "$(dirname "$target")" || fail $?
    printf '%s\n' "$encoded" | base64 -d > "$target.tmp" || fail $?
    mv "$target.tmp" "$target" || fail $?
    give_to_user "$target"
    log "file mount $2 <- metadata $1"
}

# The head's autoscaler config and the key it uses to reach the workers it launches.
write_bootstrap_files() {
    config_file="$NODE_HOME/ray_bootstrap_config.yaml"
    if metadata_attr ray-bootstrap-config > "$config_file.tmp"; then
        mv "$config_file.tmp" "$config_file" || fail $?
        give_to_user "$config_file"
        log "wrote $config_file"
    else
        rm -f "$config_file.tmp"
        log "no ray-bootstrap-config in metadata: the head runs without an autoscaling config"
    fi
    key_file="$NODE_HOME/ray_bootstrap_key.pem"
    if metadata_attr ray-bootstrap-ssh-key > "$key_file.tmp"; then
        chmod 0600 "$key_file.tmp" || fail $?
        mv "$key_file.tmp" "$key_file" || fail $?
        give_to_user "$key_file"
        log "wrote $key_file"
    else
        rm -f "$key_file.tmp"
    fi
}

# Run user command text on the host, as the node user, in a login shell like Ray's.
run_host() {
    log "+ $1"
    if [ -n "$RUN_AS" ]; then
        su - "$RUN_AS" -s /bin/bash -c "$ENV_PREFIX$1" < /dev/null || fail $?
    else
        (cd "$NODE_HOME" && HOME=$NODE_HOME bash -c "$ENV_PREFIX$1") < /dev/null || fail $?
    fi
}

# Run user command text where Ray runs: inside the container when docker is set.
run_node() {
    if [ -z "$DOCKER_IMAGE" ]; then
        run_host "$1"
        return
    fi
    log "+ (in $DOCKER_CONTAINER) $1"
    docker exec "$DOCKER_CONTAINER" /bin/bash --login -c "$ENV_PREFIX$1" < /dev/null || fail $?
}

docker_pull() {
    if [ "$DOCKER_PULL_BEFORE_RUN" = true ]; then
        log "+ docker pull $DOCKER_IMAGE"
        docker pull "$DOCKER_IMAGE" || fail $?
    elif ! docker image inspect "$DOCKER_IMAGE" > /dev/null 2>&1; then
        log "+ docker pull $DOCKER_IMAGE (not present)"
        docker pull "$DOCKER_IMAGE" || fail $?
    fi
}

container_home() {
    home=$(docker image inspect -f '{{range .Config.Env}}{{println .}}{{end}}' "$DOCKER_IMAGE" \
        | sed -n 's/^HOME=//p' | head -n 1)
    printf '%s' "${home:-/root}"
}

# Idempotent: a running container of the same image is kept; anything else is replaced.
docker_start() {
    running=$(docker inspect -f '{{.State.Running}} {{.Config.Image}}' "$DOCKER_CONTAINER" 2> /dev/null)
    if [ "$running" = "true $DOCKER_IMAGE" ]; then
        log "container $DOCKER_CONTAINER already runs $DOCKER_IMAGE: kept"
        return
    fi
    docker rm -f "$DOCKER_CONTAINER" > /dev/null 2>&1
    home=$(container_home)
    set -- run --rm --name "$DOCKER_CONTAINER" -d -it --net=host \
        -e LC_ALL=C.UTF-8 -e LANG=C.UTF-8
    while IFS= read -r target; do
        [ -n "$target" ] || continue
        source_path=$(mount_path "$target")
        [ -e "$source_path" ] || mkdir -p "$source_path"
        case $target in
            \~/*) target="$home/${target#\~/}" ;;
        esac
        set -- "$@" -v "$source_path:$target"
    done << EOF
$DOCKER_MOUNT_TARGETS
EOF
    if [ "$DOCKER_DETECT_GPU" = true ] && command -v nvidia-smi > /dev/null 2>&1 \
        && nvidia-smi > /dev/null 2>&1; then
        set -- "$@" --gpus all
    fi
    if [ "$DOCKER_DETECT_SHM" = true ]; then
        # Ray's rule: 30% of the memory available now.
        shm_bytes=$(awk '/^MemAvailable:/ {printf "%.0f", $2 * 1024 * 0.3}' /proc/meminfo)
        [ -n "$shm_bytes" ] && set -- "$@" "--shm-size=${shm_bytes}b"
    fi
    # run_options are shell words in Ray's YAML (e.g. "--ulimit nofile=65536:65536").
    eval "set -- \"\$@\" $DOCKER_RUN_OPTIONS"
    log "+ docker $* $DOCKER_IMAGE bash"
    docker "$@" "$DOCKER_IMAGE" bash || fail $?
}

# Ray copies (not bind-mounts) the bootstrap files into the container.
docker_copy_bootstrap_files() {
    home=$(container_home)
    for name in ray_bootstrap_config.yaml ray_bootstrap_key.pem; do
        if [ -f "$NODE_HOME/$name" ]; then
            docker cp "$NODE_HOME/$name" "$DOCKER_CONTAINER:$home/$name" || fail $?
        fi
    done
}

is_ipv4() {
    printf '%s' "$1" | grep -Eq '^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$'
}

# $RAY_HEAD_IP: the env wins; the head uses its own internal IP; a worker resolves the
# head's instance name (metadata ray-head-address) through the VPC's internal DNS.
resolve_head_ip() {
    if [ -n "${RAY_HEAD_IP:-}" ]; then
        log "RAY_HEAD_IP=$RAY_HEAD_IP (from the environment)"
    elif [ "$NODE_ROLE" = head ]; then
        RAY_HEAD_IP=$(metadata_path network-interfaces/0/ip || hostname -I | awk '{print $1}')
    else
        head_address=$(metadata_attr ray-head-address) || {
            log "metadata ray-head-address is missing: the program must set it on workers"
            fail 2
        }
        if is_ipv4 "$head_address"; then
            RAY_HEAD_IP=$head_address
        else
            attempt=0
            while :; do
                RAY_HEAD_IP=$(getent hosts "$head_address" | awk '{print $1; exit}')
                [ -n "$RAY_HEAD_IP" ] && break
                attempt=$((attempt + 1))
                [ "$attempt" -ge "$HEAD_RESOLVE_TRIES" ] && {
                    log "cannot resolve head $head_address after $attempt tries"
                    fail 3
                }
                sleep "$HEAD_RESOLVE_DELAY"
            done
        fi
    fi
    [ -n "$RAY_HEAD_IP" ] || fail 3
    export RAY_HEAD_IP
    log "RAY_HEAD_IP=$RAY_HEAD_IP"
    ENV_PREFIX="export RAY_HEAD_IP=$(quote "$RAY_HEAD_IP"); "
}

metadata_path() {
    is_local && return 1
    curl -fsS -H 'Metadata-Flavor: Google' "$METADATA_URL/$1" 2> /dev/null
}

# Ray's launcher passes a node type's resources to `ray start` through this env variable;
# on a TPU pod only host 0 carries TPU-<type>-head.
export_resources() {
    resources=$RESOURCES_JSON
    if [ "$NODE_IS_TPU" = true ]; then
        worker_number=$(metadata_attr agent-worker-number) || worker_number=0
        log "TPU host agent-worker-number=${worker_number:-0}"
        [ "${worker_number:-0}" = 0 ] && resources=$RESOURCES_JSON_TPU_HOST0
    fi
    if [ -n "$resources" ]; then
        ENV_PREFIX="${ENV_PREFIX}export RAY_OVERRIDE_RESOURCES=$(quote "$resources"); "
    fi
    if [ -n "$LABELS_JSON" ]; then
        ENV_PREFIX="${ENV_PREFIX}export RAY_OVERRIDE_LABELS=$(quote "$LABELS_JSON"); "
    fi
}

# A rerun or a restarted preemptible node must not find a Ray already running.
stop_ray() {
    if [ "${RAY_BOOTSTRAP_SKIP_RAY_STOP:-}" = 1 ]; then
        log "RAY_BOOTSTRAP_SKIP_RAY_STOP=1: the local cluster stops its own Ray processes"
        return
    fi
    run_node "ray stop"
}

open_log() {
    log_file=${RAY_BOOTSTRAP_LOG:-/var/log/ray-bootstrap.log}
    mkdir -p "$(dirname "$log_file")" && exec >> "$log_file" 2>&1
}
