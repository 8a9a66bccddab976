#!/usr/bin/env bash
# Local dev/test stack for pinledger: a single-node KRaft Kafka (jars from Maven
# Central) and a dedicated PostgreSQL cluster (Debian's packages). No Docker.
#
#   bash stack/stack.sh up       start both (idempotent), print `export ...` lines
#   bash stack/stack.sh down     stop both
#   bash stack/stack.sh status   running/stopped for each (exit 0 only if both run)
#   bash stack/stack.sh logs     tail both logs (`logs -f` follows; LINES_SHOWN=N lines)
#   bash stack/stack.sh env      print the `export ...` lines only
#
# `up` writes progress to stderr and only the export lines to stdout, so
#   eval "$(bash stack/stack.sh up)"
# sets PINLEDGER_KAFKA and PINLEDGER_PG_DSN in the calling shell.
#
# If PINLEDGER_KAFKA and/or PINLEDGER_PG_DSN are already set to another address than
# the one this script serves, that server is yours: `up` only checks that it
# answers, and `down` leaves it alone. (Set to this script's own address, e.g. after
# eval-ing `env`, they change nothing.)
#
# Kafka jars, data and logs live under ${PINLEDGER_CACHE:-~/.cache/pinledger}, outside
# the repo. PostgreSQL data lives where Debian puts clusters
# (/var/lib/postgresql/<ver>/pinledger), because the postgres user owns it.
set -euo pipefail

STACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${PINLEDGER_CACHE:-$HOME/.cache/pinledger}

KAFKA_VERSION=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$STACK_DIR/pom.xml")
KAFKA_HOME=$CACHE/kafka-$KAFKA_VERSION
KAFKA_LIBS=$KAFKA_HOME/libs
KAFKA_DATA=$CACHE/kafka-data
KAFKA_CONFIG=$CACHE/server.properties
KAFKA_PID=$CACHE/kafka.pid
KAFKA_LOG=$CACHE/kafka.log
# The JVM's own stdout/stderr: crashes before log4j is up (bad flags, no memory).
KAFKA_OUT=$CACHE/kafka.out
# These must match stack/kafka/server.properties.
KAFKA_HOST=127.0.0.1
KAFKA_PORT=19092
KAFKA_CONTROLLER_PORT=19093
KAFKA_HEAP=${PINLEDGER_KAFKA_HEAP:--Xmx512m -Xms256m}

PG_CLUSTER=pinledger
PG_PORT=54329
PG_USER=pinledger
PG_PASSWORD=pinledger
PG_DB=pinledger
OWN_PG_DSN=postgresql://$PG_USER:$PG_PASSWORD@127.0.0.1:$PG_PORT/$PG_DB
OWN_KAFKA=$KAFKA_HOST:$KAFKA_PORT

TIMEOUT=${PINLEDGER_STACK_TIMEOUT:-120}

# The user runs their own server when the variable names another address.
external_kafka() { [[ -n ${PINLEDGER_KAFKA:-} && $PINLEDGER_KAFKA != "$OWN_KAFKA" ]]; }
external_pg() { [[ -n ${PINLEDGER_PG_DSN:-} && $PINLEDGER_PG_DSN != "$OWN_PG_DSN" ]]; }

say() { printf '[stack] %s\n' "$*" >&2; }
die() { printf '[stack] ERROR: %s\n' "$*" >&2; exit 1; }

as_root() {
    if [[ $EUID -eq 0 ]]; then "$@"; else sudo "$@"; fi
}

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

apt_install() {
    say "installing Debian packages: $*"
    export DEBIAN_FRONTEND=noninteractive
    # The package lists may be missing or stale on a fresh machine; refresh them only
    # when a plain install fails, since `apt-get update` costs tens of seconds.
    if ! as_root apt-get install -y -q --no-install-recommends "$@" >&2; then
        as_root apt-get update -q >&2
        as_root apt-get install -y -q --no-install-recommends "$@" >&2
    fi
}

port_open() {  # host port
    timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}

# ---------------------------------------------------------------- PostgreSQL ----

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
    if ! command -v pg_ctlcluster >/dev/null || [[ -z $(pg_installed_version) ]]; then
        apt_install postgresql
    fi
    [[ -n $(pg_installed_version) ]] || die "no PostgreSQL server binaries after installing 'postgresql'"
}

# Version of the existing pinledger cluster, if one exists (it may be older than the
# newest installed server after an upgrade; keep using it).
pg_cluster_version() {
    command -v pg_lsclusters >/dev/null || return 0
    pg_lsclusters -h 2>/dev/null | awk -v c="$PG_CLUSTER" '$2 == c { print $1; exit }'
}

pg_cluster_running() {
    local ver=$1
    [[ -n $ver ]] && [[ $(pg_lsclusters -h 2>/dev/null |
        awk -v v="$ver" -v c="$PG_CLUSTER" '$1 == v && $2 == c { print $4 }') == online* ]]
}

pg_log_file() {
    local ver=$1
    pg_lsclusters -h 2>/dev/null |
        awk -v v="$ver" -v c="$PG_CLUSTER" '$1 == v && $2 == c { print $7 }'
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

pg_fail() {
    local ver=$1 msg=$2 log
    log=$(pg_log_file "$ver")
    printf '[stack] ERROR: %s\n' "$msg" >&2
    if [[ -n $log ]]; then
        printf '[stack] last lines of %s:\n' "$log" >&2
        as_root tail -n 30 "$log" >&2 || true
    fi
    cat >&2 <<EOF
[stack] What to do: read the log above; 'pg_lsclusters' shows the cluster state.
[stack]   Port $PG_PORT taken by another server?  ss -ltnp | grep $PG_PORT
[stack]   Start over (DELETES the dev database): pg_dropcluster --stop $ver $PG_CLUSTER
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

# --------------------------------------------------------------------- Kafka ----

# JVM options shared by the broker and StorageTool, so both log to the same file.
kafka_jvm_opts() {
    local heap
    read -ra heap <<<"$KAFKA_HEAP"
    KAFKA_JVM=("${heap[@]}" -XX:+UseG1GC -Djava.awt.headless=true
        -Dkafka.logs.dir="$CACHE"
        -Dlog4j2.configurationFile="$STACK_DIR/kafka/log4j2.properties"
        -cp "$KAFKA_LIBS/*")
}

kafka_ensure_tools() {
    local missing=()
    command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
    command -v mvn >/dev/null || missing+=(maven)
    (( ${#missing[@]} == 0 )) || apt_install "${missing[@]}"
    local major
    major=$(java -XshowSettings:properties -version 2>&1 |
        sed -n 's/^ *java.specification.version = //p')
    (( ${major%%.*} >= 17 )) || die "Kafka $KAFKA_VERSION needs Java 17 or newer; 'java' is $major"
}

# The jar set depends on the whole pom (e.g. the slf4j binding), not only on the
# Kafka version, so a pom change re-resolves.
kafka_ensure_libs() {
    local want have=
    want=$(sha256sum "$STACK_DIR/pom.xml" | cut -d' ' -f1)
    [[ -f $KAFKA_HOME/pom.sha256 ]] && have=$(<"$KAFKA_HOME/pom.sha256")
    if [[ -d $KAFKA_LIBS && $want == "$have" ]]; then
        return 0
    fi
    say "resolving Kafka $KAFKA_VERSION jars with Maven into $KAFKA_LIBS"
    mkdir -p "$KAFKA_HOME"
    # Into a temporary directory first: an interrupted download must not leave a
    # half-filled libs/ that later runs would take as complete.
    local tmp=$KAFKA_HOME/libs.tmp
    rm -rf "$tmp"
    # Debian's Maven 3.8.7 prints colour resets even in batch mode: strip them.
    mvn -q -B -f "$STACK_DIR/pom.xml" dependency:copy-dependencies \
        -DincludeScope=runtime -DoutputDirectory="$tmp" 2>&1 |
        sed 's/\x1b\[[0-9;]*m//g' >&2 ||
        die "Maven could not resolve the Kafka jars (see above). Is Maven Central reachable?"
    rm -rf "$KAFKA_LIBS"
    mv "$tmp" "$KAFKA_LIBS"
    printf '%s\n' "$want" >"$KAFKA_HOME/pom.sha256"
    say "$(find "$KAFKA_LIBS" -name '*.jar' | wc -l) jars in $KAFKA_LIBS"
}

kafka_pid() {
    local pid
    [[ -f $KAFKA_PID ]] || return 1
    pid=$(<"$KAFKA_PID")
    # The pid could have been reused by an unrelated process after a reboot.
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null &&
        grep -qa 'kafka\.Kafka' "/proc/$pid/cmdline" 2>/dev/null || return 1
    printf '%s' "$pid"
}

kafka_write_config() {
    mkdir -p "$KAFKA_DATA"
    {
        cat "$STACK_DIR/kafka/server.properties"
        printf '\n# Added by stack/stack.sh\nlog.dirs=%s\n' "$KAFKA_DATA"
    } >"$KAFKA_CONFIG"
}

kafka_format_once() {
    if [[ -f $KAFKA_DATA/meta.properties ]]; then
        return 0
    fi
    local cluster_id
    cluster_id=$(java "${KAFKA_JVM[@]}" kafka.tools.StorageTool random-uuid)
    say "formatting Kafka storage in $KAFKA_DATA (cluster id $cluster_id)"
    # --standalone pairs with controller.quorum.bootstrap.servers in server.properties.
    java "${KAFKA_JVM[@]}" kafka.tools.StorageTool format \
        -t "$cluster_id" -c "$KAFKA_CONFIG" --standalone >&2 ||
        die "Kafka storage format failed (see above; log: $KAFKA_LOG)"
}

kafka_up() {
    local pid
    if pid=$(kafka_pid); then
        say "Kafka already running (pid $pid) on $OWN_KAFKA"
        kafka_wait "$OWN_KAFKA" "$pid"
        return 0
    fi
    rm -f "$KAFKA_PID"
    if port_open "$KAFKA_HOST" "$KAFKA_PORT" || port_open "$KAFKA_HOST" "$KAFKA_CONTROLLER_PORT"; then
        die "port $KAFKA_PORT or $KAFKA_CONTROLLER_PORT is already in use by a process this script did not start.
        See: ss -ltnp | grep -E ':(${KAFKA_PORT}|${KAFKA_CONTROLLER_PORT})\\b'
        To use that broker instead, export PINLEDGER_KAFKA=host:port before 'up'."
    fi
    kafka_ensure_tools
    kafka_ensure_libs
    kafka_jvm_opts
    kafka_write_config
    kafka_format_once
    say "starting Kafka $KAFKA_VERSION (KRaft, broker+controller) on $OWN_KAFKA, controller on $KAFKA_HOST:$KAFKA_CONTROLLER_PORT"
    # Remember where this start begins in both logs: readiness and failure reports
    # look only at what this start wrote, not at earlier runs.
    printf '=== %s stack.sh: starting Kafka %s\n' "$(date -u +%FT%TZ)" "$KAFKA_VERSION" >>"$KAFKA_OUT"
    KAFKA_OUT_START=$(stat -c %s "$KAFKA_OUT")
    KAFKA_LOG_START=$(stat -c %s "$KAFKA_LOG" 2>/dev/null || echo 0)
    # setsid: its own session, so the broker outlives the shell (or CI step) that ran
    # `up` and is not hit by that terminal's Ctrl-C. In a non-interactive script the
    # background child is not a group leader, so setsid execs in place and $! is the
    # JVM's pid.
    nohup setsid java "${KAFKA_JVM[@]}" kafka.Kafka "$KAFKA_CONFIG" >>"$KAFKA_OUT" 2>&1 </dev/null &
    pid=$!
    printf '%s\n' "$pid" >"$KAFKA_PID"
    kafka_wait "$OWN_KAFKA" "$pid"
}

# Ready means a real client gets metadata, not just an open port: the port opens
# before the broker has caught up with the metadata log.
kafka_client_check() {
    local bootstrap=$1
    python3 - "$bootstrap" <<'PY' >/dev/null 2>&1
import sys
from kafka import KafkaAdminClient
admin = KafkaAdminClient(bootstrap_servers=sys.argv[1], request_timeout_ms=5000,
                         client_id="pinledger-stack-check")
try:
    admin.list_topics()
finally:
    admin.close()
PY
}

kafka_logged_started() {
    local from=${KAFKA_LOG_START:-0}
    [[ -f $KAFKA_LOG ]] || return 1
    (( $(stat -c %s "$KAFKA_LOG") >= from )) || from=0
    # Process substitution, not a pipe: grep -q exits at the first match, and under
    # pipefail the SIGPIPE of tail would turn the match into a failure.
    grep -q 'Kafka Server started' < <(tail -c +"$((from + 1))" "$KAFKA_LOG")
}

kafka_wait() {  # bootstrap [pid of our own broker]
    local bootstrap=$1 pid=${2:-} host port deadline=$((SECONDS + TIMEOUT)) have_client=1
    host=${bootstrap%%,*}; port=${host##*:}; host=${host%:*}
    python3 -c 'import kafka' 2>/dev/null || have_client=0
    while :; do
        if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
            kafka_fail "Kafka exited during startup"
        fi
        if port_open "$host" "$port"; then
            if (( have_client )); then
                kafka_client_check "$bootstrap" && break
            elif [[ -z $pid ]] || kafka_logged_started; then
                # Without kafka-python (not pip-installed yet) fall back to the log line.
                break
            fi
        fi
        if (( SECONDS >= deadline )); then
            [[ -n $pid ]] && kafka_fail "Kafka did not become ready on $bootstrap within ${TIMEOUT}s"
            die "no Kafka broker answered at PINLEDGER_KAFKA=$bootstrap within ${TIMEOUT}s.
        Check the broker is running, or unset PINLEDGER_KAFKA to let this script run its own."
        fi
        sleep 1
    done
    (( have_client )) || say "(kafka-python not installed: checked the port and the log line only)"
}

kafka_tail_since() {  # file byte-offset
    local f=$1 from=$2 size
    [[ -s $f ]] || return 0
    size=$(stat -c %s "$f")
    # Smaller than at the start: it rolled over, show its end. Same size: nothing new.
    (( size >= from )) || from=0
    (( size > from )) || return 0
    printf '[stack] last lines of %s:\n' "$f" >&2
    tail -c +"$((from + 1))" "$f" | tail -n 30 >&2
}

kafka_fail() {
    printf '[stack] ERROR: %s\n' "$1" >&2
    kafka_tail_since "$KAFKA_OUT" "${KAFKA_OUT_START:-0}"
    kafka_tail_since "$KAFKA_LOG" "${KAFKA_LOG_START:-0}"
    cat >&2 <<EOF
[stack] What to do: read the log above. Common causes:
[stack]   ports $KAFKA_PORT/$KAFKA_CONTROLLER_PORT taken:  ss -ltnp | grep -E ':(${KAFKA_PORT}|${KAFKA_CONTROLLER_PORT})'
[stack]   storage formatted for another config/cluster id: bash stack/stack.sh down && rm -rf '$KAFKA_DATA'
[stack]   (that deletes all topics) and run 'up' again.
EOF
    exit 1
}

kafka_down() {
    local pid
    if ! pid=$(kafka_pid); then
        say "Kafka not running"
        rm -f "$KAFKA_PID"
        return 0
    fi
    say "stopping Kafka (pid $pid)"
    kill -TERM "$pid"
    # A clean shutdown flushes logs and writes the clean-shutdown marker, so the
    # next start skips log recovery. Give it time before forcing.
    local deadline=$((SECONDS + 60))
    while kill -0 "$pid" 2>/dev/null; do
        if (( SECONDS >= deadline )); then
            say "Kafka did not stop within 60s: killing it"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.5
    done
    rm -f "$KAFKA_PID"
}

kafka_status() {
    local pid
    if pid=$(kafka_pid); then
        echo "kafka:    running (pid $pid, $OWN_KAFKA, data $KAFKA_DATA)"
    else
        echo "kafka:    stopped"; return 1
    fi
}

# ------------------------------------------------------------------ commands ----

print_env() {
    printf 'export PINLEDGER_KAFKA=%q\n' "${PINLEDGER_KAFKA:-$OWN_KAFKA}"
    printf 'export PINLEDGER_PG_DSN=%q\n' "${PINLEDGER_PG_DSN:-$OWN_PG_DSN}"
}

cmd_up() {
    mkdir -p "$CACHE"
    if external_pg; then
        say "PINLEDGER_PG_DSN is set: not starting PostgreSQL, checking it answers"
        pg_wait_dsn "$PINLEDGER_PG_DSN"
    else
        pg_up
    fi
    if external_kafka; then
        say "PINLEDGER_KAFKA is set: not starting Kafka, checking it answers"
        kafka_wait "$PINLEDGER_KAFKA"
    else
        kafka_up
    fi
    say "stack is up. Logs: bash stack/stack.sh logs"
    say "set these in your shell with: eval \"\$(bash stack/stack.sh env)\""
    print_env
}

cmd_down() {
    if external_kafka; then
        say "PINLEDGER_KAFKA=$PINLEDGER_KAFKA is not ours: leaving it alone"
    else
        kafka_down
    fi
    if external_pg; then
        say "PINLEDGER_PG_DSN is not ours: leaving that server alone"
    else
        pg_down
    fi
}

cmd_status() {
    local rc=0
    pg_status || rc=1
    kafka_status || rc=1
    external_pg && echo "(PINLEDGER_PG_DSN is set: the app uses $PINLEDGER_PG_DSN)"
    external_kafka && echo "(PINLEDGER_KAFKA is set: the app uses $PINLEDGER_KAFKA)"
    return $rc
}

cmd_logs() {
    local follow=() ver pglog files=()
    [[ ${1:-} == -f ]] && follow=(-f)
    ver=$(pg_cluster_version)
    [[ -n $ver ]] && pglog=$(pg_log_file "$ver") && [[ -n $pglog ]] && files+=("$pglog")
    [[ -f $KAFKA_OUT ]] && files+=("$KAFKA_OUT")
    [[ -f $KAFKA_LOG ]] && files+=("$KAFKA_LOG")
    (( ${#files[@]} )) || die "no logs yet (run 'up' first)"
    as_root tail -n "${LINES_SHOWN:-50}" "${follow[@]}" "${files[@]}"
}

usage() {
    sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

case ${1:-} in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    logs) shift; cmd_logs "$@" ;;
    env) print_env ;;
    *) usage ;;
esac
