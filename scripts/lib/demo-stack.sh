# The demo's stack, shared by scripts/demo and scripts/run-examples: livegate-cloud on SQLite, seeded with the demo
# data (`livegate-cloud seed --demo`: users, communities, channels, messages, posts, ...) and serving the stream
# `songs`, and livegated in front of it, logged in as `alice`, all in one directory.
#
# demo_stack_start BIN WORK: starts both from the binaries in BIN with their files in WORK; sets DEMO_CLOUD (the
# cloud's URL), DEMO_SOCKET (livegated's socket), DEMO_PASSWORD (alice's), DEMO_CLOUD_PID and DEMO_DAEMON_PID.
# The caller stops them (demo_stack_stop) and removes WORK.

# demo_wait_for DESCRIPTION COMMAND...: retries COMMAND for up to 30 s.
demo_wait_for() {
    local what=$1; shift
    for _ in $(seq 300); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
    echo "timed out waiting for $what" >&2
    return 1
}

demo_stack_start() {
    local bin=$1 work=$2
    DEMO_PASSWORD="demo-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
    echo "alice:$DEMO_PASSWORD" > "$work/users"
    echo "$DEMO_PASSWORD" > "$work/password"
    chmod 600 "$work/users" "$work/password"

    echo "==> seeding the demo social model (users, channels, messages, posts, ...)"
    "$bin/livegate-cloud" seed --demo --database "$work/cloud.sqlite" | sed 's/^/    /'

    echo "==> starting livegate-cloud (SQLite in $work/cloud.sqlite, the stream songs)"
    "$bin/livegate-cloud" --port 0 --database "$work/cloud.sqlite" --users-file "$work/users" --stream songs \
        > "$work/cloud.out" 2> "$work/cloud.log" &
    DEMO_CLOUD_PID=$!
    demo_wait_for "livegate-cloud to listen" grep -q "listening on" "$work/cloud.out"
    DEMO_CLOUD="http://$(sed -n 's/.*listening on //p' "$work/cloud.out")"
    echo "    cloud at $DEMO_CLOUD"

    DEMO_SOCKET="$work/livegate.sock"
    echo "==> starting livegated (socket $DEMO_SOCKET, the cloud's user alice)"
    "$bin/livegated" --socket "$DEMO_SOCKET" --state-dir "$work/state" --cloud-url "$DEMO_CLOUD" \
        --username alice --password-file "$work/password" 2> "$work/daemon.log" &
    DEMO_DAEMON_PID=$!
    demo_wait_for "livegated to answer" "$bin/livegatectl" status --socket "$DEMO_SOCKET"
}

# demo_stack_stop: SIGTERM to livegated, then to livegate-cloud; waits for both.
demo_stack_stop() {
    local pid
    for pid in "${DEMO_DAEMON_PID:-}" "${DEMO_CLOUD_PID:-}"; do
        [ -n "$pid" ] || continue
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}
