# ---- library: the steps every node runs. The renderer prepends the node's data (NODE_*,
# DOCKER_*, RESOURCES_*) and appends the ordered list of steps for this role and node type.
#
# Environment knobs (unset on GCE; set by the local cluster and the tests):
#   RAY_BOOTSTRAP_METADATA_DIR   read metadata attributes from files here, one per key
#   RAY_BOOTSTRAP_METADATA_URL   metadata server base (default .../computeMetadata/v1)
#   RAY_BOOTSTRAP_SECRET_MANAGER_URL  Secret Manager API base (default .../v1)
#   RAY_BOOTSTRAP_SECRET_TRIES / _SECRET_DELAY  reads of the key secret, seconds between
#   RAY_BOOTSTRAP_STORAGE_URL    Cloud Storage JSON API base (default .../storage/v1)
#   RAY_BOOTSTRAP_BUCKET_DIR     read the cluster bucket's objects from files here instead
#   RAY_BOOTSTRAP_FETCH_TRIES / _FETCH_DELAY  reads of a bucket object, seconds between
#   RAY_BOOTSTRAP_HOME           `~` for the commands (local mode: run as the current user)
#   RAY_BOOTSTRAP_LOG            log file (default /var/log/ray-bootstrap.log)
#   RAY_BOOTSTRAP_STATUS_DIR     write the status guest attribute under this directory
#   RAY_BOOTSTRAP_STATE_DIR      the head's config watcher keeps its pid and script here
#   RAY_BOOTSTRAP_WATCH_INTERVAL local mode: seconds between checks of the config file
#   RAY_BOOTSTRAP_WATCH_TIMEOUT  GCE: seconds one metadata long poll may wait for a change
#   RAY_BOOTSTRAP_SKIP_RAY_STOP  1: skip `ray stop` (it would stop every Ray on the machine)
#   RAY_HEAD_IP                  the head's address; when set it wins over metadata
#
# Exit codes besides a failed command's own: 2 no head address, 3 head unresolvable,
# 4 an object of the cluster's bucket unreadable (file_mounts, the head's autoscaler config),
# 5 head key unreadable from Secret Manager, 6 config watcher not started,
# 8 Ray auth token unreadable (Secret Manager, metadata, or the container);
# the rendered script's loader exits 7 (stage `library`) when it cannot decode this library.
#
# The rendered script ships this file gzip+base64 (its full-line comments dropped) and sources
# it: check it on its own with `shellcheck -s sh bootstrap/node_bootstrap.sh`.
# The node data (NODE_*, DOCKER_*, ...) is assigned by the rendered script, not here.
# shellcheck shell=sh disable=SC2153

METADATA_SERVER_URL=${RAY_BOOTSTRAP_METADATA_URL:-http://metadata.google.internal/computeMetadata/v1}
METADATA_URL=$METADATA_SERVER_URL/instance
SECRET_MANAGER_URL=${RAY_BOOTSTRAP_SECRET_MANAGER_URL:-https://secretmanager.googleapis.com/v1}
SECRET_TRIES=${RAY_BOOTSTRAP_SECRET_TRIES:-36}
SECRET_DELAY=${RAY_BOOTSTRAP_SECRET_DELAY:-5}
STORAGE_URL=${RAY_BOOTSTRAP_STORAGE_URL:-https://storage.googleapis.com/storage/v1}
FETCH_TRIES=${RAY_BOOTSTRAP_FETCH_TRIES:-36}
FETCH_DELAY=${RAY_BOOTSTRAP_FETCH_DELAY:-5}
WATCH_INTERVAL=${RAY_BOOTSTRAP_WATCH_INTERVAL:-2}
WATCH_TIMEOUT=${RAY_BOOTSTRAP_WATCH_TIMEOUT:-300}
STATUS_ATTRIBUTE=ray-bootstrap/status
CONFIG_KEY=ray-bootstrap-config
KEY_KEY=ray-bootstrap-ssh-key
KEY_SECRET_KEY=ray-bootstrap-ssh-key-secret
TOKEN_SECRET_KEY=ray-auth-token-secret
HEAD_PROVIDER_KEY=ray-head-provider
HEAD_PROVIDER_ARCHIVE=ray_head_provider.zip
HOST_TOKEN_FILE=
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
    report_attribute "$STATUS_ATTRIBUTE" "$1"
}

# Guest attribute $1 = $2 (a file in local mode); on GCE also a file under the state dir, so
# `invoke status` reads it over SSH.
report_attribute() {
    if is_local || [ -n "${RAY_BOOTSTRAP_STATUS_DIR:-}" ]; then
        status_file="${RAY_BOOTSTRAP_STATUS_DIR:-$RAY_BOOTSTRAP_METADATA_DIR/../guest-attributes}/$1"
        mkdir -p "$(dirname "$status_file")" && printf '%s' "$2" > "$status_file"
    else
        mirror="$(state_dir)/guest-attributes/$1"
        mkdir -p "$(dirname "$mirror")" && printf '%s' "$2" > "$mirror"
        curl -fsS -X PUT --data "$2" -H 'Metadata-Flavor: Google' \
            "$METADATA_URL/guest-attributes/$1" > /dev/null 2>&1 \
            || log "could not write guest attribute $1"
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

# One metadata request for attribute $1 into file $3: at once without an ETag ($etag), else
# held until the value differs from that ETag or $2 seconds pass (then the unchanged value
# comes back). On HTTP 200 $etag is the new one; otherwise it is cleared (the next request
# starts afresh), $poll_code says what came back, and the call fails.
long_poll_attribute() {
    url="$METADATA_URL/attributes/$1"
    [ -n "$etag" ] && url="$url?wait_for_change=true&last_etag=$etag&timeout_sec=$2"
    poll_code=$(curl -sS -o "$3" -D "$3.headers" -w '%{http_code}' \
        --max-time $(($2 + 30)) -H 'Metadata-Flavor: Google' "$url" 2> /dev/null)
    if [ "$poll_code" = 200 ]; then
        etag=$(sed -n 's/^[Ee][Tt][Aa][Gg]:[[:space:]]*//p' "$3.headers" | tr -d '\r' \
            | tail -n 1)
        return 0
    fi
    etag=
    return 1
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
    if authorized_key=$(metadata_attr ray-authorized-key) && [ -n "$authorized_key" ]; then
        authorize_key "$authorized_key"
    fi
    log "node role=$NODE_ROLE type=$NODE_TYPE cluster=$NODE_CLUSTER home=$NODE_HOME"
}

# OS Login: the guest ignores `ssh-keys`, so the cluster's key (the head's Ray reaches
# workers with it) is authorized for auth.ssh_user here, once.
authorize_key() {
    mkdir -p "$NODE_HOME/.ssh" || fail $?
    touch "$NODE_HOME/.ssh/authorized_keys" || fail $?
    if ! grep -qxF "$1" "$NODE_HOME/.ssh/authorized_keys"; then
        printf '%s\n' "$1" >> "$NODE_HOME/.ssh/authorized_keys" || fail $?
    fi
    chmod 0700 "$NODE_HOME/.ssh"
    chmod 0600 "$NODE_HOME/.ssh/authorized_keys"
    if [ -n "$RUN_AS" ]; then
        chown -R "$RUN_AS" "$NODE_HOME/.ssh"
    fi
}

# Hand a file we wrote as root to the user the commands run as.
give_to_user() {
    if [ -n "$RUN_AS" ]; then
        chown "$RUN_AS" "$1"
    fi
}

# `~/x` and relative `x` -> under the node home (Ray's remote paths are relative to it);
# absolute paths unchanged.
expand_home() {
    case $1 in
        \~) printf '%s' "$NODE_HOME" ;;
        \~/*) printf '%s/%s' "$NODE_HOME" "${1#\~/}" ;;
        /*) printf '%s' "$1" ;;
        *) printf '%s/%s' "$NODE_HOME" "$1" ;;
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

# ---- objects in the cluster's bucket (file_mounts, the head's autoscaler config), read with
# the node's own service account through the Cloud Storage JSON API. In local mode (and when
# RAY_BOOTSTRAP_BUCKET_DIR is set) the bucket is a folder: object NAME is the file NAME in it.

# The node's access token on stdout (the metadata server's answer is JSON).
access_token() {
    curl -fsS -H 'Metadata-Flavor: Google' "$METADATA_URL/service-accounts/default/token" \
        2> /dev/null \
        | python3 -c 'import json, sys; print(json.load(sys.stdin)["access_token"])' 2> /dev/null
}

# Object $2 of bucket $1 into file $3, retried: the bucket's reader grant may take a minute or
# two to reach IAM after the node is created. The token goes to curl on stdin, not its command
# line (other users see that); the file is private until the caller moves it.
fetch_object() {
    if [ -n "${RAY_BOOTSTRAP_BUCKET_DIR:-}" ]; then
        (umask 077 && cp "$RAY_BOOTSTRAP_BUCKET_DIR/$2" "$3") && return 0
        log "object $2 is not in $RAY_BOOTSTRAP_BUCKET_DIR"
        return 1
    fi
    if ! command -v python3 > /dev/null 2>&1; then
        log "python3 is missing: it reads the metadata server's token (install python3 in the image)"
        return 1
    fi
    # Object names here hold letters, digits, . _ - and /; the API takes / as %2F.
    url="$STORAGE_URL/b/$1/o/$(printf '%s' "$2" | sed 's,/,%2F,g')?alt=media"
    if ! retry_until_granted "$FETCH_TRIES" "$FETCH_DELAY" fetch_object_once "$url" "$3"; then
        log "could not read gs://$1/$2 after $attempt tries: the node's service account" \
            "needs roles/storage.objectViewer on the bucket and the node a storage or" \
            "cloud-platform scope"
        return 1
    fi
    log "gs://$1/$2 fetched (try $attempt)"
}

# Run "$3..." until it succeeds, at most $1 tries $2 seconds apart: a new node's IAM grant may
# take a minute or two to reach the API. `attempt` is left at the last try made.
retry_until_granted() {
    tries=$1
    delay=$2
    shift 2
    attempt=1
    while ! "$@"; do
        if [ "$attempt" -ge "$tries" ]; then
            return 1
        fi
        attempt=$((attempt + 1))
        sleep "$delay"
    done
}

fetch_object_once() (
    umask 077
    token=$(access_token) || token=
    if [ -z "$token" ]; then
        log "no access token from the metadata server (does the node run as a service account?)"
        return 1
    fi
    code=$(printf 'Authorization: Bearer %s\n' "$token" | curl -sS -o "$2" \
        -w '%{http_code}' -H @- "$1" 2> "$2.err")
    if [ "$code" != 200 ]; then
        log "Cloud Storage answered HTTP ${code:-none} for $1:" \
            "$(cat "$2.err" "$2" 2> /dev/null | head -c 300 | tr '\n' ' ')"
        rm -f "$2" "$2.err"
        return 1
    fi
    rm -f "$2.err"
)

# The file_mounts archive (object $1) unpacked into a private folder; place_file_mount then
# moves each member to its target and drop_file_mounts removes the rest.
fetch_file_mounts() {
    FILE_MOUNTS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ray-file-mounts.XXXXXX") || fail 4
    fetch_object "$CLUSTER_BUCKET" "$1" "$FILE_MOUNTS_DIR/archive.tar.gz" || {
        rm -rf "$FILE_MOUNTS_DIR"
        fail 4
    }
    if ! { mkdir "$FILE_MOUNTS_DIR/members" \
        && tar -xzf "$FILE_MOUNTS_DIR/archive.tar.gz" -C "$FILE_MOUNTS_DIR/members"; }; then
        log "the file_mounts archive $1 cannot be unpacked (tar -xzf)"
        rm -rf "$FILE_MOUNTS_DIR"
        fail 4
    fi
}

# Member $1 of the archive to remote path $2: a folder's contents merge into the target (as
# rsync's `src/ dst` does, nothing else there is removed), a file replaces the target file.
place_file_mount() {
    source_path="$FILE_MOUNTS_DIR/members/$1"
    target=$(mount_path "$2")
    mkdir -p "$(dirname "$target")" || fail $?
    if [ -d "$source_path" ]; then
        { mkdir -p "$target" && cp -pPR "$source_path/." "$target/"; } || fail $?
        if [ -n "$RUN_AS" ]; then
            chown "$RUN_AS" "$target"
            (cd "$source_path" && find . -mindepth 1) | while IFS= read -r entry; do
                chown -h "$RUN_AS" "$target/$entry"
            done
        fi
    else
        { rm -f "$target.tmp" && cp -pP "$source_path" "$target.tmp" \
            && mv -f "$target.tmp" "$target"; } || fail $?
        [ -z "$RUN_AS" ] || chown -h "$RUN_AS" "$target"
    fi
    log "file mount $2 <- archive member $1"
}

drop_file_mounts() {
    rm -rf "$FILE_MOUNTS_DIR"
}

# ---- head only (to the end marker): workers' scripts leave it out (startup_script.py).

# The head's autoscaler config and the key it uses to reach the workers it launches.
write_bootstrap_files() {
    config_file="$NODE_HOME/ray_bootstrap_config.yaml"
    rm -f "$config_file.tmp"
    # 0600: it holds every worker's body (the fetched object too: fetch_object writes 0600).
    if (umask 077 && metadata_attr "$CONFIG_KEY" > "$config_file.tmp"); then
        read_config_reference "$config_file.tmp"
        if [ -n "$reference" ]; then
            resolve_config "$config_file.tmp" || fail 4
            mkdir -p "$(state_dir)" && printf '%s\n' "$reference" > "$(state_dir)/config.reference"
        fi
        chmod 0600 "$config_file.tmp" || fail $?
        mv "$config_file.tmp" "$config_file" || fail $?
        give_to_user "$config_file"
        log "wrote $config_file"
    else
        rm -f "$config_file.tmp"
        log "no $CONFIG_KEY in metadata: the head runs without an autoscaling config"
    fi
    write_bootstrap_key
}

# The key: metadata $KEY_KEY in local mode; on GCP the secret version named by
# $KEY_SECRET_KEY, so the key never sits in instance metadata. Exactly the stored bytes are
# written: Ray's launch hash covers the key file's contents.
write_bootstrap_key() {
    key_file="$NODE_HOME/ray_bootstrap_key.pem"
    rm -f "$key_file.tmp"
    (umask 077 && : > "$key_file.tmp") || fail $?
    if metadata_attr "$KEY_KEY" > "$key_file.tmp"; then
        log "key from metadata $KEY_KEY"
    elif secret_version=$(metadata_attr "$KEY_SECRET_KEY") && [ -n "$secret_version" ]; then
        read_secret "$secret_version" "$key_file.tmp" || {
            rm -f "$key_file.tmp"
            fail 5
        }
    else
        rm -f "$key_file.tmp"
        log "no $KEY_KEY or $KEY_SECRET_KEY in metadata: the autoscaler cannot reach nodes over SSH"
        return
    fi
    chmod 0600 "$key_file.tmp" || fail $?
    mv "$key_file.tmp" "$key_file" || fail $?
    give_to_user "$key_file"
    log "wrote $key_file"
}

# The head's node provider (bootstrap/head_provider, a zip, base64 in metadata
# $HEAD_PROVIDER_KEY): Ray's autoscaler imports it from this file, which export_head_provider
# puts on `ray start`'s PYTHONPATH. A running container gets the new file at once; a new one
# gets it from docker_copy_bootstrap_files.
install_head_provider() {
    archive="$NODE_HOME/$HEAD_PROVIDER_ARCHIVE"
    rm -f "$archive.tmp"
    if ! metadata_attr "$HEAD_PROVIDER_KEY" | base64 -d > "$archive.tmp" 2> /dev/null \
        || [ ! -s "$archive.tmp" ]; then
        rm -f "$archive.tmp"
        log "metadata $HEAD_PROVIDER_KEY is missing or undecodable: an autoscaling config that" \
            "names the head's node provider cannot load it"
        return
    fi
    { chmod 0644 "$archive.tmp" && mv "$archive.tmp" "$archive"; } || fail $?
    give_to_user "$archive"
    log "wrote $archive (the autoscaler's node provider, $1)"
    [ -n "$DOCKER_IMAGE" ] || return 0
    running=$(docker inspect -f '{{.State.Running}} {{.Config.Image}}' "$DOCKER_CONTAINER" 2> /dev/null)
    [ "$running" = "true $DOCKER_IMAGE" ] || return 0
    docker_install_private "$archive" "$(container_home)/$HEAD_PROVIDER_ARCHIVE" || fail $?
    log "copied it into container $DOCKER_CONTAINER"
}

# `ray start --head` (and the autoscaler it starts) imports the node provider from the zip.
export_head_provider() {
    [ -f "$NODE_HOME/$HEAD_PROVIDER_ARCHIVE" ] || return 0
    home=$NODE_HOME
    [ -z "$DOCKER_IMAGE" ] || home=$(container_home)
    ENV_PREFIX="${ENV_PREFIX}export PYTHONPATH=$(quote "$home/$HEAD_PROVIDER_ARCHIVE")"
    ENV_PREFIX="${ENV_PREFIX}\${PYTHONPATH:+:\$PYTHONPATH}; "
}

# ---- end of head only

# Secret version $1 (projects/P/secrets/S/versions/V) into file $2, retried: the accessor
# grant on the secret may take a minute or two to reach IAM after the head is created.
read_secret() {
    if ! command -v python3 > /dev/null 2>&1; then
        log "python3 is missing: it reads the Secret Manager answer (install python3 in the image)"
        return 1
    fi
    if ! retry_until_granted "$SECRET_TRIES" "$SECRET_DELAY" access_secret "$1" "$2"; then
        log "could not read secret $1 after $attempt tries: the node's service account" \
            "needs roles/secretmanager.secretAccessor on it and the node the" \
            "cloud-platform scope"
        return 1
    fi
    log "read secret $1 from Secret Manager (try $attempt)"
}

# One try, in a subshell whose files only their owner can read (the answer holds the secret).
# The token goes to curl on stdin, not its command line (other users see that).
access_secret() (
    umask 077
    token=$(access_token) || token=
    if [ -z "$token" ]; then
        log "no access token from the metadata server (does the node run as a service account?)"
        return 1
    fi
    response="$2.response"
    code=$(printf 'Authorization: Bearer %s\n' "$token" | curl -sS -o "$response" \
        -w '%{http_code}' -H @- "$SECRET_MANAGER_URL/$1:access" 2>> "$response.err")
    if [ "$code" != 200 ]; then
        log "Secret Manager answered HTTP ${code:-none} for $1:" \
            "$(cat "$response.err" "$response" 2> /dev/null | head -c 300 | tr '\n' ' ')"
        rm -f "$response" "$response.err"
        return 1
    fi
    rm -f "$response.err"
    python3 -c 'import base64, json, sys
sys.stdout.buffer.write(base64.b64decode(json.load(sys.stdin)["payload"]["data"]))' \
        < "$response" > "$2"
    decoded=$?
    rm -f "$response"
    [ "$decoded" = 0 ] || log "the Secret Manager answer for $1 has no base64 payload.data"
    return "$decoded"
)

# ---- Ray's token authentication: every `ray start` (and the head's autoscaler, its child)
# runs with RAY_AUTH_MODE=token and RAY_AUTH_TOKEN_PATH naming a 0600 file of the user Ray
# runs as. On GCP the token is the secret version metadata $TOKEN_SECRET_KEY names; the local
# cluster gives its own file in RAY_AUTH_TOKEN_PATH. The token is never logged.
write_auth_token() {
    HOST_TOKEN_FILE=
    if [ "$NODE_RAY_TOKEN_AUTH" != true ]; then
        log "Ray token authentication is off (provider.ray_token_auth: false)"
        return
    fi
    if secret_version=$(metadata_attr "$TOKEN_SECRET_KEY") && [ -n "$secret_version" ]; then
        token_dir="$NODE_HOME/.ray"
        HOST_TOKEN_FILE="$token_dir/auth_token"
        mkdir -p "$token_dir" || fail $?
        rm -f "$HOST_TOKEN_FILE.tmp"
        (umask 077 && : > "$HOST_TOKEN_FILE.tmp") || fail $?
        read_secret "$secret_version" "$HOST_TOKEN_FILE.tmp" || {
            rm -f "$HOST_TOKEN_FILE.tmp"
            fail 8
        }
        chmod 0600 "$HOST_TOKEN_FILE.tmp" || fail $?
        mv "$HOST_TOKEN_FILE.tmp" "$HOST_TOKEN_FILE" || fail $?
        if [ -n "$RUN_AS" ]; then
            chown "$RUN_AS" "$token_dir" "$HOST_TOKEN_FILE" || fail $?
        fi
        log "wrote $HOST_TOKEN_FILE"
    elif is_local && [ -n "${RAY_AUTH_TOKEN_PATH:-}" ] && [ -f "$RAY_AUTH_TOKEN_PATH" ]; then
        HOST_TOKEN_FILE=$RAY_AUTH_TOKEN_PATH
        log "Ray auth token from RAY_AUTH_TOKEN_PATH=$HOST_TOKEN_FILE"
    else
        log "Ray token authentication is on but metadata has no $TOKEN_SECRET_KEY:" \
            "the program sets it on every node (or set provider.ray_token_auth: false)"
        fail 8
    fi
    token_path=$HOST_TOKEN_FILE
    if [ -n "$DOCKER_IMAGE" ]; then
        # Owned by the container's user (the one `ray start` runs as), 0600, as the bootstrap
        # files are: docker cp, not a command line, carries it.
        token_path="$(container_home)/.ray/auth_token"
        { docker exec -u 0 "$DOCKER_CONTAINER" mkdir -p "${token_path%/*}" < /dev/null \
            && docker_install_private "$HOST_TOKEN_FILE" "$token_path"; } || fail 8
        log "copied the Ray auth token into container $DOCKER_CONTAINER: $token_path"
    fi
    add_start_env RAY_AUTH_MODE token
    add_start_env RAY_AUTH_TOKEN_PATH "$token_path"
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
# "$@": the YAML's run_options as argv words, split at plan time and passed as quoted data
# (never evaluated: shell syntax in them reaches docker as text).
docker_start() {
    running=$(docker inspect -f '{{.State.Running}} {{.Config.Image}}' "$DOCKER_CONTAINER" 2> /dev/null)
    if [ "$running" = "true $DOCKER_IMAGE" ]; then
        log "container $DOCKER_CONTAINER already runs $DOCKER_IMAGE: kept"
        return
    fi
    docker rm -f "$DOCKER_CONTAINER" > /dev/null 2>&1
    home=$(container_home)
    user_options=$#
    set -- "$@" run --rm --name "$DOCKER_CONTAINER" -d -it --net=host \
        -e LC_ALL=C.UTF-8 -e LANG=C.UTF-8
    while IFS= read -r target; do
        [ -n "$target" ] || continue
        source_path=$(mount_path "$target")
        [ -e "$source_path" ] || mkdir -p "$source_path"
        case $target in
            \~/*) target="$home/${target#\~/}" ;;
            /*) ;;
            *) target="$home/$target" ;;
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
    # The user's options come last, as in Ray's command: rotate them past ours.
    while [ "$user_options" -gt 0 ]; do
        set -- "$@" "$1"
        shift
        user_options=$((user_options - 1))
    done
    log "+ docker $* $DOCKER_IMAGE bash"
    docker "$@" "$DOCKER_IMAGE" bash || fail $?
}

# Ray copies (not bind-mounts) the bootstrap files into the container; the head's node
# provider goes with them.
docker_copy_bootstrap_files() {
    home=$(container_home)
    for name in ray_bootstrap_config.yaml ray_bootstrap_key.pem "$HEAD_PROVIDER_ARCHIVE"; do
        if [ -f "$NODE_HOME/$name" ]; then
            docker_install_private "$NODE_HOME/$name" "$home/$name" || fail $?
        fi
    done
}

# Host file $1 into the container as $2, 0600 and owned by the container's user: the one
# `docker exec` runs as, whose `id -u`:`id -g` Ray's launcher chowns its copies to (Ray's
# images run as `ray`, uid 1000, and could not read a root-owned 0600 file). `docker cp`
# makes root the owner, so the copy is chowned by root in the container, then renamed into
# place (readers see the old file or the new one).
docker_install_private() {
    owner=$(docker exec "$DOCKER_CONTAINER" id -u < /dev/null) \
        && group=$(docker exec "$DOCKER_CONTAINER" id -g < /dev/null) || return 1
    case "$owner:$group" in
        *[!0-9:]* | :* | *:) log "container $DOCKER_CONTAINER: no user id ($owner:$group)"; return 1 ;;
    esac
    docker cp "$1" "$DOCKER_CONTAINER:$2.tmp" \
        && docker exec -u 0 "$DOCKER_CONTAINER" chown "$owner:$group" "$2.tmp" < /dev/null \
        && docker exec -u 0 "$DOCKER_CONTAINER" chmod 0600 "$2.tmp" < /dev/null \
        && docker exec -u 0 "$DOCKER_CONTAINER" mv -f "$2.tmp" "$2" < /dev/null
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

# Print instance metadata $1 (`zone`, `name`, `scheduling/preemptible`); local mode reads the
# file instance/$1 next to the metadata dir, when the local cluster or a test wrote one.
metadata_path() {
    server_metadata "instance/$1"
}

# Print metadata server path $1 (`instance/zone`, `project/project-id`); status 1 without it.
server_metadata() {
    if is_local; then
        [ -f "$RAY_BOOTSTRAP_METADATA_DIR/../$1" ] && cat "$RAY_BOOTSTRAP_METADATA_DIR/../$1"
        return
    fi
    curl -fsS -H 'Metadata-Flavor: Google' "$METADATA_SERVER_URL/$1" 2> /dev/null
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
    labels=$LABELS_JSON
    pinned_under_v2 && labels=$PINNED_LABELS_JSON
    if [ -n "$labels" ]; then
        ENV_PREFIX="${ENV_PREFIX}export RAY_OVERRIDE_LABELS=$(quote "$labels"); "
    fi
}

# A node Pulumi keeps (metadata ray-node-kind: unmanaged) in a cluster run by autoscaler v2
# (PINNED_TYPE_NAME set): it names itself to v2 as its type's pinned twin, the type v2 counts
# Pulumi's nodes as and never launches or retires (bootstrap/head_provider/pinned.py).
pinned_under_v2() {
    [ -n "$PINNED_TYPE_NAME" ] && [ "$(metadata_attr ray-node-kind)" = unmanaged ]
}

# `export NAME='VALUE'; ` for the start commands: ENV_PREFIX reaches the `ray start` process
# itself (an export here would not survive `su -` or `docker exec`).
add_start_env() {
    ENV_PREFIX="${ENV_PREFIX}export $1=$(quote "$2"); "
}

# What Ray reads from `ray start`'s environment to name and place this node, as `ray up` and
# v2's RayInstaller set it, plus the placement labels Ray's GCP launcher never sets:
# RAY_NODE_TYPE_NAME (the type `ray status` and autoscaler v2 name the node by; label
# ray.io/node-group), RAY_NODE_ZONE / RAY_NODE_REGION (ray.io/availability-zone / -region),
# RAY_NODE_MARKET_TYPE (ray.io/market-type: spot or on-demand). A node Ray's autoscaler
# manages (the head, the workers it launches) also reports RAY_CLOUD_INSTANCE_ID, the id Ray's
# GCP provider knows its instance by, and RAY_CLOUD_INSTANCE_TYPE_NAME (the machine type, as v2's
# RayInstaller reads it from the node_config; none on a TPU VM): autoscaler v2 joins the
# Ray node to the instance by it. A node Pulumi keeps (metadata ray-node-kind: unmanaged) does
# so under v2 alone, as its type's pinned twin (pinned_under_v2): v1 never joins it. The head
# says which autoscaler runs.
export_ray_identity() {
    if pinned_under_v2; then
        add_start_env RAY_NODE_TYPE_NAME "$PINNED_TYPE_NAME"
    else
        add_start_env RAY_NODE_TYPE_NAME "$NODE_TYPE"
    fi
    zone=$(metadata_path zone) && zone=${zone##*/} && [ -n "$zone" ] \
        && add_start_env RAY_NODE_ZONE "$zone" && add_start_env RAY_NODE_REGION "${zone%-*}"
    # ray.io/market-type: spot for a spot or preemptible instance; unknown in local mode.
    case $(metadata_path scheduling/provisioning-model):$(metadata_path scheduling/preemptible) in
        SPOT:* | *:TRUE) add_start_env RAY_NODE_MARKET_TYPE spot ;;
        :) ;;
        *) add_start_env RAY_NODE_MARKET_TYPE on-demand ;;
    esac
    if pinned_under_v2 || [ "$(metadata_attr ray-node-kind)" != unmanaged ]; then
        # The id Ray's GCP provider knows the node by: the instance name, or a TPU node's
        # full name.
        if [ "$NODE_IS_TPU" = true ]; then
            id=projects/$(server_metadata project/project-id)/locations/$zone/nodes/$(metadata_attr instance-id)
        else
            id=$(metadata_path name) || id=
        fi
        [ -n "$id" ] && add_start_env RAY_CLOUD_INSTANCE_ID "$id"
        machine=$(metadata_path machine-type) && [ "$NODE_IS_TPU" != true ] \
            && add_start_env RAY_CLOUD_INSTANCE_TYPE_NAME "${machine##*/}"
    fi
    [ "$NODE_ROLE" = head ] && add_start_env RAY_enable_autoscaler_v2 "$AUTOSCALER_V2"
}

# A rerun or a restarted preemptible node must not find a Ray already running.
stop_ray() {
    if [ "${RAY_BOOTSTRAP_SKIP_RAY_STOP:-}" = 1 ]; then
        log "RAY_BOOTSTRAP_SKIP_RAY_STOP=1: the local cluster stops its own Ray processes"
        return
    fi
    run_node "ray stop"
}

# Readable by root only: it logs every command line, and those may carry secrets.
open_log() {
    log_file=${RAY_BOOTSTRAP_LOG:-/var/log/ray-bootstrap.log}
    mkdir -p "$(dirname "$log_file")" && (umask 077 && : >> "$log_file") \
        && chmod 0600 "$log_file" && exec >> "$log_file" 2>&1
}

# ---- the head's config watcher. GCE runs the startup script only at boot, so a `pulumi up`
# that changes metadata $CONFIG_KEY would never reach the file the autoscaler reads each
# update. A detached copy of this script (`sh COPY watch-config HOME RUN_AS`) follows the
# attribute and rewrites the file when it changes.

state_dir() {
    if [ -n "${RAY_BOOTSTRAP_STATE_DIR:-}" ]; then
        printf '%s' "$RAY_BOOTSTRAP_STATE_DIR"
    elif is_local; then
        printf '%s/state' "$(cd "$RAY_BOOTSTRAP_METADATA_DIR/.." && pwd)"
    else
        printf '/run/ray-bootstrap'
    fi
}

# ---- head only (to the end of the file): workers' scripts leave it out.

# One config watcher per head (see start_watcher).
start_config_watcher() {
    dir=$(state_dir)
    mkdir -p "$dir" || fail 6
    if start_watcher "config watcher" "$dir/config-watcher.sh" "$dir/config-watcher.pid" \
        watch-config sh "$dir/config-watcher.sh" watch-config "$NODE_HOME" "$RUN_AS"; then
        log "config watcher started (pid $(cat "$dir/config-watcher.pid")), state in $dir"
    fi
}

# The config attribute holds the YAML itself (local mode, tests) or `gs://BUCKET/OBJECT`, the
# bucket object the program stored it in: GCE caps one metadata value at 256 KB, and the config
# holds a worker body per node type. Sets $reference to the one file $1 holds, else empty;
# no subshell, as the watcher calls it on every poll.
read_config_reference() {
    reference=
    first=
    IFS= read -r first < "$1" || :
    case $first in
        gs://?*/?*) reference=$first ;;
    esac
}

# File $1, holding $reference, becomes the object's content.
resolve_config() {
    location=${reference#gs://}
    fetch_object "${location%%/*}" "${location#*/}" "$1.object" && mv "$1.object" "$1"
}

# File $1 is what metadata holds now: a new reference is fetched, then installed; the one
# installed last is not fetched again (a long poll's timeout answers the unchanged value).
install_config() {
    read_config_reference "$1"
    if [ -n "$reference" ]; then
        [ "$reference" = "$(cat "$(state_dir)/config.reference" 2> /dev/null)" ] && return 0
        if ! resolve_config "$1"; then
            log "config watcher: could not read $reference: the config is kept as it was"
            return 1
        fi
    fi
    install_config_file "$1" || return 1
    [ -z "$reference" ] || printf '%s\n' "$reference" > "$(state_dir)/config.reference"
}

# Replace the config file with file $1 when they differ (rename: readers see old or new).
install_config_file() {
    config_file="$NODE_HOME/ray_bootstrap_config.yaml"
    [ -f "$config_file" ] && cmp -s "$1" "$config_file" && return 0
    rm -f "$config_file.tmp"
    if ! { (umask 077 && cp "$1" "$config_file.tmp") && chmod 0600 "$config_file.tmp" \
        && mv "$config_file.tmp" "$config_file"; }; then
        log "config watcher: could not rewrite $config_file"
        return 1
    fi
    give_to_user "$config_file"
    log "config watcher: metadata $CONFIG_KEY changed: rewrote $config_file"
    [ -n "$DOCKER_IMAGE" ] || return 0
    # The autoscaler in the container reads its own copy (see docker_copy_bootstrap_files).
    home=$(container_home)
    if docker_install_private "$config_file" "$home/ray_bootstrap_config.yaml"; then
        log "config watcher: copied it into container $DOCKER_CONTAINER"
    else
        log "config watcher: could not copy it into container $DOCKER_CONTAINER"
    fi
}

# The watcher's loop; it stops when the pid file names another process (a newer watcher).
watch_config() {
    NODE_HOME=$1
    RUN_AS=$2
    CURRENT_STAGE=config-watcher
    pid_file="$(state_dir)/config-watcher.pid"
    printf '%s\n' "$$" > "$pid_file.$$" && mv "$pid_file.$$" "$pid_file"
    log "config watcher pid=$$ follows metadata $CONFIG_KEY"
    fetched="$(state_dir)/config.fetched"
    # The fetched copy holds what the config holds: private before anything is written to it
    # (curl -o and cp keep an existing file's mode).
    (umask 077 && : > "$fetched") && chmod 0600 "$fetched"
    etag=
    while [ "$(cat "$pid_file" 2> /dev/null)" = "$$" ]; do
        if is_local; then
            if [ -f "$RAY_BOOTSTRAP_METADATA_DIR/$CONFIG_KEY" ]; then
                cp "$RAY_BOOTSTRAP_METADATA_DIR/$CONFIG_KEY" "$fetched" && install_config "$fetched"
            fi
            sleep "$WATCH_INTERVAL"
        else
            long_poll_config
        fi
    done
    log "config watcher pid=$$ stops: $pid_file names another watcher"
}

# One long poll of the config; a new value is installed, a failure waits and says why.
long_poll_config() {
    if long_poll_attribute "$CONFIG_KEY" "$WATCH_TIMEOUT" "$fetched"; then
        install_config "$fetched"
        return
    fi
    if [ "$poll_code" = 404 ]; then
        log "config watcher: metadata $CONFIG_KEY is gone: $NODE_HOME/ray_bootstrap_config.yaml kept"
    else
        log "config watcher: metadata server answered HTTP ${poll_code:-none}: retrying"
    fi
    sleep "$WATCH_INTERVAL"
}

# ---- the head's autostop daemon (bootstrap/autostop.py and bootstrap/head_provider/spend.py,
# a zip python3 runs, base64 in metadata ray-autostop-daemon): it stops the cluster once idle, as
# `provider.autostop` or `invoke autostop` says, and at `provider.spend_cap`'s total. Without
# python3 the node still works, but never stops itself: say so loudly.
start_autostop() {
    dir=$(state_dir)
    daemon="$dir/autostop.pyz"
    pid_file="$dir/autostop.pid"
    mkdir -p "$dir" || fail $?
    if ! command -v python3 > /dev/null 2>&1; then
        log "python3 is missing: autostop cannot run on this head (install python3 in the image)"
        return
    fi
    if ! metadata_attr ray-autostop-daemon | base64 -d > "$daemon.new" \
            || [ ! -s "$daemon.new" ]; then
        rm -f "$daemon.new"
        log "metadata ray-autostop-daemon is missing or undecodable: autostop is off"
        return
    fi
    old_pid=$(cat "$pid_file" 2> /dev/null) && kill -0 "$old_pid" 2> /dev/null \
        && tr '\0' ' ' < "/proc/$old_pid/cmdline" | grep -q "$dir/autostop.py" \
        && kill "$old_pid" 2> /dev/null && log "autostop daemon pid $old_pid replaced"
    mv "$daemon.new" "$daemon" || fail $?
    # It asks the dashboard whether Ray is busy: with token auth it presents the token.
    RAY_AUTH_TOKEN_PATH=$HOST_TOKEN_FILE setsid python3 "$daemon" --home "$NODE_HOME" \
        < /dev/null >> "$log_file" 2>&1 &
    printf '%s\n' "$!" > "$pid_file"
    log "autostop daemon started (pid $!)"
}
