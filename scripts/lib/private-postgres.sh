# Sourced by scripts/test and scripts/bench-cloud: a private PostgreSQL server for one run.
# private_postgres_start DIR [EXTRA-SERVER-OPTIONS] runs initdb into DIR/data and starts the server on a
# Unix socket in DIR only (no TCP); as root its programs run as the postgres user (Debian's postgresql
# package creates it). private_postgres_stop DIR stops it and removes DIR.

private_postgres_bindir() {
    echo "${LIVEGATE_PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}"
}

private_postgres_as_owner() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

private_postgres_start() {
    local dir="$1" options="${2:-}" bindir
    bindir="$(private_postgres_bindir)"
    [ -x "$bindir/initdb" ] || { echo "no PostgreSQL server programs (initdb) under /usr/lib/postgresql/*/bin" >&2; return 1; }
    [ "$(id -u)" -ne 0 ] || chown postgres: "$dir"
    private_postgres_as_owner "$bindir/initdb" -D "$dir/data" --auth=trust --username=postgres --encoding=UTF8 --no-locale > /dev/null
    private_postgres_as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start \
        -o "-k $dir -c listen_addresses='' $options" > /dev/null
}

private_postgres_stop() {
    local dir="$1"
    private_postgres_as_owner "$(private_postgres_bindir)/pg_ctl" -D "$dir/data" stop -m fast > /dev/null 2>&1 || true
    rm -rf "$dir"
}
