# ---- re-apply: a running node converges on a changed startup script without a reboot.
# Shipped in the same payload as node_bootstrap.sh (after it) and checked on its own with
# `shellcheck -s sh bootstrap/node_reapply.sh`.
#
# GCE runs the startup script only at boot. Every node therefore starts a detached node watcher
# (`sh COPY watch-script`) that follows metadata $VERSION_KEY, "<script version>[ <request>]",
# where the request is `restart-only <stamp>` or `no-restart <stamp>` (`invoke up
# --restart-only/--no-restart`). When the version differs from the one the watcher runs, it
# fetches the new script and runs it as `sh NEW reapply MODE`: each stage carries the hash of
# what it runs, and only stages whose hash differs from the one recorded on the node rerun; Ray
# restarts when anything changed (or on restart-only, never on no-restart). Setup runs before
# `ray stop`, so a failing stage leaves the running Ray as it was. On success the watcher
# re-executes itself on the new script. A worker restarts Ray once the head is ready, and
# again whenever the head restarts its Ray (the head's guest attribute $RAY_STARTED_ATTRIBUTE).
#
# Environment knobs (unset on GCE; set by the local cluster and the tests):
#   RAY_BOOTSTRAP_HEAD_STATUS_DIR  read the head's guest attributes from files here
#   RAY_BOOTSTRAP_COMPUTE_URL      Compute API base (default https://compute.googleapis.com/...)
#   RAY_BOOTSTRAP_FOLLOW_INTERVAL  seconds between a worker's checks of the head (GCE: 30)
#   RAY_BOOTSTRAP_HEAD_WAIT_TRIES / _HEAD_WAIT_DELAY  a worker's wait for a busy head
# log_file, CURRENT_STAGE, ...: node_bootstrap.sh's, sourced with this file.
# shellcheck shell=sh disable=SC2153,SC2154,SC2034

VERSION_KEY=ray-bootstrap-version
VERSION_ATTRIBUTE=ray-bootstrap/version
RAY_STARTED_ATTRIBUTE=ray-bootstrap/ray-started
COMPUTE_URL=${RAY_BOOTSTRAP_COMPUTE_URL:-https://compute.googleapis.com/compute/v1}
FOLLOW_INTERVAL=${RAY_BOOTSTRAP_FOLLOW_INTERVAL:-30}
HEAD_WAIT_TRIES=${RAY_BOOTSTRAP_HEAD_WAIT_TRIES:-120}
HEAD_WAIT_DELAY=${RAY_BOOTSTRAP_HEAD_WAIT_DELAY:-5}
REAPPLY_MODE=boot
STAGE_RAN=false
CONTAINER_REPLACED=false
PENDING_STAGE=
PENDING_HASH=
HEAD_IP_GIVEN=${RAY_HEAD_IP:-}

# `sh SCRIPT reapply MODE`: full (changed stages, then Ray), restart-only, no-restart.
begin_reapply() {
    case $1 in
        full | restart-only | no-restart) REAPPLY_MODE=$1 ;;
        *) log "re-apply: unknown mode $1: using full" && REAPPLY_MODE=full ;;
    esac
}

is_reapply() {
    [ "$REAPPLY_MODE" != boot ]
}

stage_hash_file() {
    printf '%s/stages/%s' "$(state_dir)" "$1"
}

record_stage_hash() {
    mkdir -p "$(state_dir)/stages" && printf '%s\n' "$2" > "$(stage_hash_file "$1")"
}

# Whether stage $1, whose content hashes to $2, runs now: always at boot; on a re-apply only
# when the hash differs from the recorded one (setup also after its container was replaced).
stage() {
    PENDING_STAGE=$1
    PENDING_HASH=$2
    if is_reapply; then
        [ "$REAPPLY_MODE" = restart-only ] && return 1
        recorded=$(cat "$(stage_hash_file "$1")" 2> /dev/null)
        if [ "$recorded" = "$2" ] && { [ "$1" != setup ] || [ "$CONTAINER_REPLACED" = false ]; }
        then
            log "re-apply: stage $1 unchanged: skipped"
            return 1
        fi
        if [ "$1" = docker-run ] && [ "$REAPPLY_MODE" = no-restart ]; then
            log "re-apply (no-restart): the container's settings changed: they apply with" \
                "the next restart (replacing the container would stop Ray)"
            return 1
        fi
        log "re-apply: stage $1 changed: running it"
        STAGE_RAN=true
        if [ "$1" = docker-run ]; then
            CONTAINER_REPLACED=true
            docker rm -f "$DOCKER_CONTAINER" > /dev/null 2>&1
        fi
    fi
    begin_stage "$1"
}

stage_done() {
    record_stage_hash "$PENDING_STAGE" "$PENDING_HASH"
}

# Whether to run `ray stop` + the start commands ($1: their hash) now.
restart_ray() {
    PENDING_HASH=$1
    is_reapply || return 0
    case $REAPPLY_MODE in
        no-restart)
            log "re-apply (no-restart): Ray keeps running as it was"
            return 1
            ;;
        full)
            if [ "$STAGE_RAN" = false ] && [ "$(cat "$(stage_hash_file ray-start)" 2> /dev/null)" = "$1" ]; then
                log "re-apply: nothing Ray runs changed: Ray not restarted"
                return 1
            fi
            ;;
    esac
    [ "$NODE_ROLE" = head ] || wait_for_head
    return 0
}

# After the start commands: remember their hash; the head tells workers its Ray restarted, a
# worker remembers which start of the head's Ray it joined (its node watcher follows it).
ray_started() {
    record_stage_hash ray-start "$PENDING_HASH"
    if [ "$NODE_ROLE" = head ]; then
        report_attribute "$RAY_STARTED_ATTRIBUTE" \
            "$SCRIPT_VERSION $(date -u +%Y-%m-%dT%H:%M:%SZ) $$"
    elif joined=$(head_attribute ray-started) && [ -n "$joined" ]; then
        printf '%s\n' "$joined" > "$(state_dir)/head-ray-started"
    fi
}

report_applied() {
    report_attribute "$VERSION_ATTRIBUTE" "$SCRIPT_VERSION"
    log "version $SCRIPT_VERSION applied"
}

# Print the head's guest attribute ray-bootstrap/$1; status 1 when it cannot be read.
head_attribute() {
    if [ -n "${RAY_BOOTSTRAP_HEAD_STATUS_DIR:-}" ]; then
        cat "$RAY_BOOTSTRAP_HEAD_STATUS_DIR/ray-bootstrap/$1" 2> /dev/null
        return
    fi
    is_local && return 1
    head=$(metadata_attr ray-head-address) || return 1
    is_ipv4 "$head" && return 1
    project=$(curl -fsS -H 'Metadata-Flavor: Google' \
        "${METADATA_URL%/instance}/project/project-id" 2> /dev/null) || return 1
    zone=$(metadata_path zone) || return 1
    token=$(metadata_path service-accounts/default/token \
        | sed -n 's/.*"access_token" *: *"\([^"]*\)".*/\1/p')
    [ -n "$token" ] || return 1
    # The token goes to curl on stdin, not its command line (other users see that).
    printf 'Authorization: Bearer %s\n' "$token" | curl -fsS -H @- \
        "$COMPUTE_URL/projects/$project/zones/${zone##*/}/instances/$head/getGuestAttributes?variableKey=ray-bootstrap/$1" \
        2> /dev/null | sed -n 's/.*"variableValue" *: *"\([^"]*\)".*/\1/p'
}

# Head first: a worker restarts Ray once the head is not in the middle of its own run.
wait_for_head() {
    tries=0
    while :; do
        head_status=$(head_attribute status) || {
            log "re-apply: the head's status is unreadable: not waiting for it"
            return
        }
        case $head_status in
            ready | failed:*)
                log "re-apply: head is $head_status"
                return
                ;;
        esac
        tries=$((tries + 1))
        if [ "$tries" -ge "$HEAD_WAIT_TRIES" ]; then
            log "re-apply: head still ${head_status:-silent} after $tries checks: going on"
            return
        fi
        sleep "$HEAD_WAIT_DELAY"
    done
}

# ---- the node watcher

# Start it detached (boot only: on a re-apply the running watcher re-executes itself).
start_node_watcher() {
    if is_reapply; then
        log "node watcher: the running one takes this script when the re-apply ends"
        return
    fi
    dir=$(state_dir)
    mkdir -p "$dir" || fail 6
    # Each re-apply resolves the head anew (it may have been replaced), unless RAY_HEAD_IP
    # came from our own environment.
    if start_watcher "node watcher" "$dir/node-script.sh" "$dir/node-watcher.pid" watch-script \
        env RAY_HEAD_IP="$HEAD_IP_GIVEN" sh "$dir/node-script.sh" watch-script; then
        log "node watcher started (pid $(cat "$dir/node-watcher.pid"))"
    fi
}

# ---- detached watchers (the node watcher; on the head also the config watcher)

# Start WHAT ($1), a watcher running a copy ($2) of this node's current script, its pid in
# file $3, its mode argument $4, by the command after them; returns 1 when it already runs.
# One watcher per pid file: a rerun keeps one running this same script and replaces one
# running another (older) script. Its own session (setsid): it outlives this script and the
# service running it. The watcher writes its pid first thing; once it has, a rerun finds it.
start_watcher() {
    what=$1 copy=$2 pid_file=$3 mode=$4
    shift 4
    metadata_attr startup-script > "$copy.new" || {
        log "metadata startup-script is unreadable: the $what cannot start"
        fail 6
    }
    if old_pid=$(running_watcher "$pid_file" "$mode"); then
        if cmp -s "$copy.new" "$copy"; then
            rm -f "$copy.new"
            log "$what already runs (pid $old_pid): kept"
            return 1
        fi
        log "$what pid $old_pid runs an older script: replaced"
        kill -TERM "-$old_pid" 2> /dev/null || kill "$old_pid" 2> /dev/null
    fi
    mv "$copy.new" "$copy" || fail 6
    rm -f "$pid_file"
    setsid "$@" < /dev/null >> "$log_file" 2>&1 &
    tries=0
    until [ -s "$pid_file" ]; do
        tries=$((tries + 1))
        [ "$tries" -le 100 ] || {
            log "$what did not start: see the lines above"
            fail 6
        }
        sleep 0.1
    done
}

# The pid in pid file $1 when that process is a watcher running in mode $2.
running_watcher() {
    watcher_pid=$(cat "$1" 2> /dev/null) || return 1
    [ -n "$watcher_pid" ] && kill -0 "$watcher_pid" 2> /dev/null || return 1
    tr '\0' ' ' < "/proc/$watcher_pid/cmdline" 2> /dev/null | grep -q " $2" || return 1
    printf '%s' "$watcher_pid"
}

# The loop; it stops when the pid file names another process (a newer watcher).
watch_script() {
    CURRENT_STAGE=node-watcher
    dir=$(state_dir)
    copy="$dir/node-script.sh"
    pid_file="$dir/node-watcher.pid"
    printf '%s\n' "$$" > "$pid_file.$$" && mv "$pid_file.$$" "$pid_file"
    log "node watcher pid=$$ runs version $SCRIPT_VERSION and follows metadata $VERSION_KEY"
    value=$(metadata_attr "$VERSION_KEY")
    last_request=$(request_of "$value")
    failed_version=
    etag=
    while [ "$(cat "$pid_file" 2> /dev/null)" = "$$" ]; do
        wait_for_version
        version=${value%% *}
        request=$(request_of "$value")
        if [ -n "$version" ] && [ "$version" != "$SCRIPT_VERSION" ] \
            && [ "$version" != "$failed_version" ]; then
            reapply_script "$(mode_of "$request" "$last_request")"
        elif [ -n "$request" ] && [ "$request" != "$last_request" ]; then
            reapply_script "$(mode_of "$request" "$last_request")"
        fi
        last_request=$request
        follow_head
    done
    log "node watcher pid=$$ stops: $pid_file names another watcher"
}

request_of() {
    case $1 in
        *" "*) printf '%s' "${1#* }" ;;
    esac
}

# A new request names the mode; an old one (already acted on) does not.
mode_of() {
    if [ -n "$1" ] && [ "$1" != "$2" ]; then
        printf '%s' "${1%% *}"
    else
        printf full
    fi
}

# Set $value to metadata $VERSION_KEY: after WATCH_INTERVAL in local mode; on GCE a long poll
# held until it changes (a worker wakes every FOLLOW_INTERVAL to look at the head).
wait_for_version() {
    if is_local; then
        sleep "$WATCH_INTERVAL"
        value=$(metadata_attr "$VERSION_KEY")
        return
    fi
    timeout=$WATCH_TIMEOUT
    [ "$NODE_ROLE" = head ] || timeout=$FOLLOW_INTERVAL
    fetched="$dir/version.fetched"
    if long_poll_attribute "$VERSION_KEY" "$timeout" "$fetched"; then
        value=$(cat "$fetched")
        return
    fi
    value=
    sleep "$WATCH_INTERVAL"
}

# Run the metadata's script as a re-apply in mode $1; on success become its watcher.
reapply_script() {
    next="$dir/node-script.next"
    metadata_attr startup-script > "$next" || {
        log "node watcher: metadata startup-script is unreadable: nothing re-applied"
        return
    }
    next_version=$(sed -n "s/^SCRIPT_VERSION='\\([0-9a-f]*\\)'\$/\\1/p" "$next")
    log "node watcher: re-applying version $next_version over $SCRIPT_VERSION ($1)"
    if sh "$next" reapply "$1"; then
        mv "$next" "$copy"
        exec sh "$copy" watch-script
    fi
    failed_version=$next_version
    log "node watcher: re-apply of version $next_version failed: Ray keeps what it ran;" \
        "the next change of $VERSION_KEY is tried"
}

# A worker restarts its Ray once the head's guest attribute $RAY_STARTED_ATTRIBUTE differs
# from the start of the head's Ray this worker joined (once per change, failed or not).
follow_head() {
    [ "$NODE_ROLE" = head ] && return
    now=$(head_attribute ray-started) && [ -n "$now" ] || return
    joined_file="$dir/head-ray-started"
    joined=$(cat "$joined_file" 2> /dev/null)
    [ "$now" = "$joined" ] && return
    printf '%s\n' "$now" > "$joined_file"
    [ -n "$joined" ] || return
    log "node watcher: the head restarted Ray ($now): restarting Ray here"
    sh "$copy" reapply restart-only || log "node watcher: restarting Ray after the head failed"
}
