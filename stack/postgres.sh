# shellcheck shell=bash
# The stack's PostgreSQL: a dedicated cluster `pinledger` of Debian's packages, on
# 127.0.0.1:54329. Sourced by stack/stack.sh after lib.sh and install.sh.

PG_CLUSTER=pinledger
PG_PORT=54329
PG_USER=pinledger
PG_PASSWORD=pinledger
PG_DB=pinledger
OWN_PG_DSN=postgresql://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/$PG_DB

external_pg() { [[ -n ${PINLEDGER_PG_DSN:-} && $PINLEDGER_PG_DSN != "$OWN_PG_DSN" ]]; }

# Runs a command as the postgres OS user. `cd /` because runuser keeps the cwd, and
# psql complains when postgres cannot read it (e.g. /root).
as_postgres() {
    if [[ $EUID -eq 0 ]]; then
        (cd / && runuser -u postgres -- "$@")
    elif [[ $(id -un) == postgres ]]; then
        (cd / && "$@")
    else
        (cd / && sudo -u postgres -- "$@")
    fi
}

# Newest installed server major version, or empty. psql alone (postgresql-client)
# is not enough: pg_createcluster needs the server binaries.
pg_installed_version() {
    local d best=
    for d in /usr/lib/postgresql/*/bin/postgres; do
        [[ -x $d ]] || continue
        d=${d#/usr/lib/postgresql/}; d=${d%%/*}
        if [[ -z $best ]] || (( d > best )); then best=$d; fi
    done
    printf '%s' "$best"
}

pg_ensure_server_installed() {
    install_missing postgres
    [[ -n $(pg_installed_version) ]] || die "no PostgreSQL server binaries after installing 'postgresql'"
}

# Version of the existing pinledger cluster, if one exists (it may be older than the
# newest installed server after an upgrade; keep using it).
pg_cluster_version() { pg_cluster_version_of "$PG_CLUSTER"; }

pg_cluster_version_of() {  # cluster
    command -v pg_lsclusters >/dev/null || return 0
    pg_lsclusters -h 2>/dev/null | awk -v c="$1" '$2 == c { print $1; exit }'
}

# Column N of pg_lsclusters for a cluster (4: status, 6: data directory, 7: log file).
pg_cluster_field() {  # ver cluster N
    pg_lsclusters -h 2>/dev/null |
        awk -v v="$1" -v c="$2" -v n="$3" '$1 == v && $2 == c { print $n }'
}

pg_cluster_running() {  # ver [cluster]
    local ver=$1
    [[ -n $ver ]] && [[ $(pg_cluster_field "$ver" "${2:-$PG_CLUSTER}" 4) == online* ]]
}

pg_log_file() {  # ver [cluster]
    pg_cluster_field "$1" "${2:-$PG_CLUSTER}" 7
}

pg_print_settings() {
    say "PostgreSQL settings (from stack/postgres/pinledger.conf):"
    grep -Ev '^\s*(#|$)' "$STACK_DIR/postgres/pinledger.conf" | sed 's/^/[stack]     /' >&2
    say "  note: synchronous_commit = off is for dev/test only (a crash may lose the last commits)"
}

pg_up() {
    pg_ensure_server_installed
    local ver
    ver=$(pg_cluster_version)
    if [[ -z $ver ]]; then
        ver=$(pg_installed_version)
        say "creating PostgreSQL $ver cluster '$PG_CLUSTER' on port $PG_PORT"
        # pg_createcluster runs initdb as the postgres user (initdb refuses root).
        # --start-conf manual: the system's postgresql service must not start it at
        # boot; this script does.
        as_root pg_createcluster "$ver" "$PG_CLUSTER" --port "$PG_PORT" \
            --start-conf manual --encoding UTF8 --locale C.UTF-8 >&2
    fi
    local conf_dir=/etc/postgresql/$ver/$PG_CLUSTER/conf.d
    local changed=0
    if ! as_root cmp -s "$STACK_DIR/postgres/pinledger.conf" "$conf_dir/pinledger.conf"; then
        as_root install -o postgres -g postgres -m 0644 \
            "$STACK_DIR/postgres/pinledger.conf" "$conf_dir/pinledger.conf"
        changed=1
    fi
    if pg_cluster_running "$ver"; then
        if (( changed )); then
            say "pinledger.conf changed: restarting PostgreSQL $ver/$PG_CLUSTER"
            as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$PG_CLUSTER" restart >&2
        else
            say "PostgreSQL $ver/$PG_CLUSTER already running on port $PG_PORT"
        fi
    else
        pg_print_settings
        say "starting PostgreSQL $ver/$PG_CLUSTER"
        # --skip-systemctl-redirect: behave the same with and without systemd (CI has none).
        if ! as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$PG_CLUSTER" start >&2; then
            pg_fail "$ver" "pg_ctlcluster could not start the cluster"
        fi
    fi
    pg_wait_local "$ver"
    # Idempotent: create the role and database if missing, and (re)set the password
    # and flags so a half-finished earlier run cannot leave them wrong.
    as_postgres psql -X -q -v ON_ERROR_STOP=1 -p "$PG_PORT" -d postgres <<SQL
SELECT format('CREATE ROLE %I', '$PG_USER')
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$PG_USER') \\gexec
ALTER ROLE $PG_USER WITH LOGIN CREATEDB PASSWORD '$PG_PASSWORD';
SELECT format('CREATE DATABASE %I OWNER %I', '$PG_DB', '$PG_USER')
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = '$PG_DB') \\gexec
SQL
    pg_wait_dsn "$OWN_PG_DSN" "$ver"
}

pg_wait_local() {
    local ver=$1 deadline=$((SECONDS + TIMEOUT))
    until as_postgres pg_isready -q -p "$PG_PORT"; do
        (( SECONDS < deadline )) || pg_fail "$ver" "PostgreSQL did not accept connections within ${TIMEOUT}s"
        sleep 0.5
    done
}

# Connects the way the application will: over TCP with the password.
# The last failure's message is kept in PG_CHECK_ERROR for the error report.
pg_check_dsn() {
    local dsn=$1
    if command -v psql >/dev/null; then
        PG_CHECK_ERROR=$(psql -X -q -w -t -A "$dsn" -c 'select 1' 2>&1 >/dev/null)
    else
        PG_CHECK_ERROR=$(python3 -c 'import sys, psycopg; psycopg.connect(sys.argv[1], connect_timeout=3).execute("select 1")' \
            "$dsn" 2>&1 >/dev/null)
    fi
}

pg_wait_dsn() {
    local dsn=$1 ver=${2:-} deadline=$((SECONDS + TIMEOUT))
    until pg_check_dsn "$dsn"; do
        if (( SECONDS >= deadline )); then
            [[ -n $ver ]] && pg_fail "$ver" "could not run 'select 1' as $PG_USER over TCP within ${TIMEOUT}s: $PG_CHECK_ERROR"
            die "PostgreSQL at PINLEDGER_PG_DSN did not answer 'select 1' within ${TIMEOUT}s:
        $PG_CHECK_ERROR
        Check the server is running and the DSN is right, or unset PINLEDGER_PG_DSN to let
        this script run its own cluster."
        fi
        sleep 0.5
    done
}

pg_fail() {  # ver message
    pg_cluster_fail "$PG_CLUSTER" "$PG_PORT" "" "$@"
}

# A cluster that did not come up: its log's last lines and what to do.
pg_cluster_fail() {  # cluster port label ver message
    local cluster=$1 port=$2 label=$3 ver=$4 log
    log=$(pg_log_file "$ver" "$cluster")
    printf '[stack] ERROR: %s%s\n' "$label" "$5" >&2
    if [[ -n $log ]]; then
        printf '[stack] last lines of %s:\n' "$log" >&2
        as_root tail -n 30 "$log" >&2 || true
    fi
    cat >&2 <<EOF
[stack] What to do: read the log above; 'pg_lsclusters' shows the cluster state.
[stack]   Port $port taken by another server?  ss -ltnp | grep $port
[stack]   Start over (DELETES its databases): pg_dropcluster --stop $ver $cluster
EOF
    exit 1
}

pg_down() {
    local ver
    ver=$(pg_cluster_version)
    if [[ -n $ver ]] && pg_cluster_running "$ver"; then
        say "stopping PostgreSQL $ver/$PG_CLUSTER"
        as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$PG_CLUSTER" stop >&2
    else
        say "PostgreSQL cluster '$PG_CLUSTER' not running"
    fi
}

pg_status() {
    local ver
    ver=$(pg_cluster_version)
    if [[ -z $ver ]]; then
        echo "postgres: stopped (cluster '$PG_CLUSTER' not created yet)"; return 1
    elif pg_cluster_running "$ver"; then
        echo "postgres: running ($ver/$PG_CLUSTER, $OWN_PG_DSN)"
    else
        echo "postgres: stopped ($ver/$PG_CLUSTER)"; return 1
    fi
}
