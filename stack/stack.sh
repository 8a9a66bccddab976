#!/usr/bin/env bash
# Local dev/test stack for pinledger: a single-node KRaft Kafka (jars from Maven
# Central), a dedicated PostgreSQL cluster (Debian's packages) and a private MariaDB
# server (Debian's mariadb-server, run by this script, not as the system service). No
# Docker.
#
#   bash stack/stack.sh up       start them (idempotent), print `export ...` lines
#   bash stack/stack.sh down     stop them
#   bash stack/stack.sh status   running/stopped for each (exit 0 only if all run)
#   bash stack/stack.sh logs     tail the logs (`logs -f` follows; LINES_SHOWN=N lines)
#   bash stack/stack.sh env      print the `export ...` lines only
#
# `up` writes progress to stderr and only the export lines to stdout, so
#   eval "$(bash stack/stack.sh up)"
# sets PINLEDGER_KAFKA, PINLEDGER_PG_DSN and PINLEDGER_MYSQL_DSN in the calling shell.
#
# A three-broker KRaft cluster (for the chaos tests) runs beside the single node, on
# 127.0.0.1:19192,19292,19392 (controllers 19193,19293,19393):
#   bash stack/stack.sh cluster up       start it (idempotent), print the export line
#                                        of PINLEDGER_KAFKA_CLUSTER
#   bash stack/stack.sh cluster down     stop it (`down` stops it too)
#   bash stack/stack.sh cluster status   running/stopped for each broker
#   bash stack/stack.sh cluster kill N.. SIGKILL broker(s) N (1..3): a crash
#   bash stack/stack.sh cluster start N.. start broker(s) N, wait until they are back
#   bash stack/stack.sh cluster env      print the export line only
# PINLEDGER_KAFKA_BROKERS=3 makes `up`, `down`, `status` and `env` cover the cluster too.
#
#   bash stack/stack.sh pg kill          crash the stack's PostgreSQL (immediate stop)
#   bash stack/stack.sh pg start         start it again and wait until it answers
#
# If PINLEDGER_KAFKA, PINLEDGER_PG_DSN or PINLEDGER_MYSQL_DSN are set to another
# address than the one this script serves, that server is yours: `up` only checks that
# it answers, and `down` leaves it alone. (Set to this script's own address, e.g. after
# eval-ing `env`, they change nothing.)
#
# Kafka jars, data and logs live under ${PINLEDGER_CACHE:-~/.cache/pinledger}, outside
# the repo. PostgreSQL data lives where Debian puts clusters
# (/var/lib/postgresql/<ver>/pinledger), because the postgres user owns it. MariaDB's
# data, config and log live in <cache>/mariadb (as root: /var/lib/pinledger-mariadb
# unless the mysql user can reach the cache; PINLEDGER_MARIADB_DIR overrides).
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

# The private MariaDB server of the MySQL projection store (the port must match
# stack/mariadb/pinledger.cnf's).
MY_PORT=33069
MY_USER=pinledger
MY_PASSWORD=pinledger
MY_DB=pinledger
OWN_MYSQL_DSN=mysql://$MY_USER:$MY_PASSWORD@127.0.0.1:$MY_PORT/$MY_DB
OWN_KAFKA=$KAFKA_HOST:$KAFKA_PORT

# The three-broker cluster for the chaos tests (`cluster ...`), beside the single node.
# Node N listens on 19N92 (controller 19N93); each has its own directory with data,
# config, pid file and logs.
CLUSTER_DIR=$CACHE/cluster
CLUSTER_ID_FILE=$CLUSTER_DIR/cluster.id
CLUSTER_NODES=(1 2 3)
# Three JVMs on a small machine: less than the single node each.
CLUSTER_HEAP=${PINLEDGER_KAFKA_CLUSTER_HEAP:--Xmx384m -Xms128m}
CLUSTER_BOOTSTRAP= CLUSTER_VOTERS=
for n in "${CLUSTER_NODES[@]}"; do
    CLUSTER_BOOTSTRAP+=${CLUSTER_BOOTSTRAP:+,}$KAFKA_HOST:$((KAFKA_PORT + 100 * n))
    CLUSTER_VOTERS+=${CLUSTER_VOTERS:+,}$n@$KAFKA_HOST:$((KAFKA_CONTROLLER_PORT + 100 * n))
done
OWN_KAFKA_CLUSTER=$CLUSTER_BOOTSTRAP
# 1 (the default): `up` starts the single node only; 3: the cluster as well.
KAFKA_BROKERS=${PINLEDGER_KAFKA_BROKERS:-1}

TIMEOUT=${PINLEDGER_STACK_TIMEOUT:-120}

# The user runs their own server when the variable names another address.
external_kafka() { [[ -n ${PINLEDGER_KAFKA:-} && $PINLEDGER_KAFKA != "$OWN_KAFKA" ]]; }
external_kafka_cluster() {
    [[ -n ${PINLEDGER_KAFKA_CLUSTER:-} && $PINLEDGER_KAFKA_CLUSTER != "$OWN_KAFKA_CLUSTER" ]]
}
external_pg() { [[ -n ${PINLEDGER_PG_DSN:-} && $PINLEDGER_PG_DSN != "$OWN_PG_DSN" ]]; }
external_mysql() { [[ -n ${PINLEDGER_MYSQL_DSN:-} && $PINLEDGER_MYSQL_DSN != "$OWN_MYSQL_DSN" ]]; }

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

# ------------------------------------------------------------------- MariaDB ----

# A private MariaDB server (Debian's mariadb-server binaries) for the MySQL projection
# store: its own data directory, started and stopped by this script as it runs Kafka,
# never the system's mariadb service. As root it runs as the mysql OS user, so its data
# directory must be one that user can reach: the cache when it can, else
# /var/lib/pinledger-mariadb (a root's ~/.cache sits under /root, which is mode 700).
mariadb_paths() {
    if [[ -n ${MARIADB_DIR:-} ]]; then return 0; fi
    MARIADB_DIR=${PINLEDGER_MARIADB_DIR:-}
    if [[ -z $MARIADB_DIR ]]; then
        MARIADB_DIR=$CACHE/mariadb
        # The nearest existing folder on the way: the cache may not exist yet.
        local reach=$CACHE
        until [[ -d $reach ]]; do reach=$(dirname "$reach"); done
        if [[ $EUID -eq 0 ]] && ! runuser -u mysql -- test -x "$reach" 2>/dev/null; then
            MARIADB_DIR=/var/lib/pinledger-mariadb
        fi
    fi
    MARIADB_DATA=$MARIADB_DIR/data
    MARIADB_CNF=$MARIADB_DIR/my.cnf
    MARIADB_PID=$MARIADB_DIR/mariadb.pid
    MARIADB_SOCK=$MARIADB_DIR/mariadb.sock
    MARIADB_LOG=$MARIADB_DIR/mariadb.log
}

mariadb_ensure_installed() {
    command -v mariadbd >/dev/null || [[ -x /usr/sbin/mariadbd ]] || apt_install mariadb-server
    [[ -x /usr/sbin/mariadbd ]] || die "no /usr/sbin/mariadbd after installing 'mariadb-server'"
}

mariadb_pid() {
    local pid
    mariadb_paths
    [[ -f $MARIADB_PID ]] || return 1
    pid=$(<"$MARIADB_PID")
    # The pid could have been reused by an unrelated process after a reboot.
    [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null &&
        grep -qa 'mariadbd' "/proc/$pid/cmdline" 2>/dev/null || return 1
    printf '%s' "$pid"
}

# As root the server (and the files it writes) belong to the mysql user.
mariadb_user_args() {
    MARIADB_USER_ARGS=()
    if [[ $EUID -eq 0 ]]; then MARIADB_USER_ARGS=(--user=mysql); fi
}

mariadb_write_config() {
    mkdir -p "$MARIADB_DIR"
    {
        cat "$STACK_DIR/mariadb/pinledger.cnf"
        printf '\n# Added by stack/stack.sh\ndatadir = %s\nsocket = %s\npid-file = %s\nlog-error = %s\n' \
            "$MARIADB_DATA" "$MARIADB_SOCK" "$MARIADB_PID" "$MARIADB_LOG"
    } >"$MARIADB_CNF"
    if [[ $EUID -eq 0 ]]; then chown mysql:mysql "$MARIADB_DIR"; fi
}

mariadb_install_once() {
    [[ -d $MARIADB_DATA/mysql ]] && return 0
    say "creating the MariaDB data directory $MARIADB_DATA"
    rm -rf "$MARIADB_DATA"
    mariadb-install-db --defaults-file="$MARIADB_CNF" "${MARIADB_USER_ARGS[@]}" \
        --datadir="$MARIADB_DATA" --skip-test-db --auth-root-authentication-method=socket \
        >>"$MARIADB_DIR/install.log" 2>&1 ||
        { tail -n 30 "$MARIADB_DIR/install.log" >&2; die "mariadb-install-db failed (log above: $MARIADB_DIR/install.log)"; }
}

# The admin connection: over the socket as the OS user that installed the data
# directory (root, or yourself), authenticated by unix_socket.
mariadb_admin_sql() {
    mariadb --no-defaults --protocol=socket --socket="$MARIADB_SOCK" -u "$(id -un)" "$@"
}

mariadb_up() {
    mariadb_paths
    local pid
    if pid=$(mariadb_pid); then
        say "MariaDB already running (pid $pid) on 127.0.0.1:$MY_PORT"
    else
        rm -f "$MARIADB_PID"
        if port_open 127.0.0.1 "$MY_PORT"; then
            die "port $MY_PORT is already in use by a process this script did not start.
        See: ss -ltnp | grep ':$MY_PORT\\b'
        To use that server instead, export PINLEDGER_MYSQL_DSN=mysql://user:password@host:port/db before 'up'."
        fi
        mariadb_ensure_installed
        mariadb_user_args
        mariadb_write_config
        mariadb_install_once
        say "starting MariaDB ($(/usr/sbin/mariadbd --version | awk '{print $3}')) on 127.0.0.1:$MY_PORT, data in $MARIADB_DATA"
        MARIADB_LOG_START=$(stat -c %s "$MARIADB_LOG" 2>/dev/null || echo 0)
        # setsid: its own session, so the server outlives the shell that ran `up`.
        nohup setsid /usr/sbin/mariadbd --defaults-file="$MARIADB_CNF" "${MARIADB_USER_ARGS[@]}" \
            >>"$MARIADB_DIR/mariadbd.out" 2>&1 </dev/null &
        pid=$!
    fi
    local deadline=$((SECONDS + TIMEOUT))
    until mariadb-admin --no-defaults --protocol=socket --socket="$MARIADB_SOCK" -u "$(id -un)" \
        ping >/dev/null 2>&1; do
        kill -0 "$pid" 2>/dev/null || mariadb_fail "MariaDB exited during startup"
        (( SECONDS < deadline )) || mariadb_fail "MariaDB did not answer within ${TIMEOUT}s"
        sleep 0.5
    done
    # Idempotent: the user, its password and the database, whatever an earlier run left.
    # ALL on *.*: the tests and replays create a database per schema.
    mariadb_admin_sql <<SQL
CREATE USER IF NOT EXISTS '$MY_USER'@'127.0.0.1' IDENTIFIED BY '$MY_PASSWORD';
CREATE USER IF NOT EXISTS '$MY_USER'@'localhost' IDENTIFIED BY '$MY_PASSWORD';
ALTER USER '$MY_USER'@'127.0.0.1' IDENTIFIED BY '$MY_PASSWORD';
ALTER USER '$MY_USER'@'localhost' IDENTIFIED BY '$MY_PASSWORD';
GRANT ALL PRIVILEGES ON *.* TO '$MY_USER'@'127.0.0.1';
GRANT ALL PRIVILEGES ON *.* TO '$MY_USER'@'localhost';
CREATE DATABASE IF NOT EXISTS \`$MY_DB\`;
SQL
    mariadb_wait_dsn "$MY_USER" "$MY_PASSWORD" 127.0.0.1 "$MY_PORT" "$MY_DB"
}

# Connects the way the application will: over TCP with the password.
mariadb_wait_dsn() {  # user password host port db
    local deadline=$((SECONDS + TIMEOUT)) err
    until err=$(MYSQL_PWD=$2 mariadb --no-defaults --protocol=tcp -u "$1" -h "$3" -P "$4" "$5" \
        -e 'select 1' 2>&1 >/dev/null); do
        (( SECONDS < deadline )) || die "MariaDB/MySQL at $3:$4 did not answer 'select 1' as $1 within ${TIMEOUT}s:
        $err
        Check the server is running and the DSN is right, or unset PINLEDGER_MYSQL_DSN to let
        this script run its own."
        sleep 0.5
    done
}

# mysql://user:password@host:port/db, parsed into the fields mariadb_wait_dsn takes.
mariadb_wait_external() {
    local dsn=$1 rest user password host port db
    [[ $dsn =~ ^mysql://([^:@/]+):([^@/]*)@([^:/]+):([0-9]+)/([A-Za-z0-9_]+)$ ]] ||
        die "PINLEDGER_MYSQL_DSN=$dsn: expected mysql://user:password@host:port/database"
    user=${BASH_REMATCH[1]} password=${BASH_REMATCH[2]} host=${BASH_REMATCH[3]}
    port=${BASH_REMATCH[4]} db=${BASH_REMATCH[5]}
    command -v mariadb >/dev/null || apt_install mariadb-client
    mariadb_wait_dsn "$user" "$password" "$host" "$port" "$db"
}

mariadb_fail() {
    printf '[stack] ERROR: %s\n' "$1" >&2
    if [[ -s $MARIADB_LOG ]]; then
        printf '[stack] last lines of %s:\n' "$MARIADB_LOG" >&2
        tail -c +"$(( ${MARIADB_LOG_START:-0} + 1 ))" "$MARIADB_LOG" | tail -n 30 >&2
    fi
    cat >&2 <<EOF
[stack] What to do: read the log above ($MARIADB_LOG, $MARIADB_DIR/mariadbd.out).
[stack]   Port $MY_PORT taken by another server?  ss -ltnp | grep $MY_PORT
[stack]   Start over (DELETES the dev database): bash stack/stack.sh down && rm -rf '$MARIADB_DATA'
EOF
    exit 1
}

mariadb_down() {
    local pid deadline=$((SECONDS + 60))
    if ! pid=$(mariadb_pid); then
        say "MariaDB not running"
        return 0
    fi
    say "stopping MariaDB (pid $pid)"
    kill -TERM "$pid"
    while kill -0 "$pid" 2>/dev/null; do
        if (( SECONDS >= deadline )); then
            say "MariaDB did not stop within 60s: killing it"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.5
    done
    rm -f "$MARIADB_PID"
}

mariadb_status() {
    local pid
    if pid=$(mariadb_pid); then
        echo "mariadb: running (pid $pid, $OWN_MYSQL_DSN, data in $MARIADB_DATA)"
    else
        echo "mariadb: stopped"; return 1
    fi
}

# --------------------------------------------------------------------- Kafka ----

# JVM options shared by the broker and StorageTool, so both log to the same file.
# The cluster's nodes pass their own heap and log directory.
kafka_jvm_opts() {  # [heap flags] [log dir]
    local heap
    read -ra heap <<<"${1:-$KAFKA_HEAP}"
    KAFKA_JVM=("${heap[@]}" -XX:+UseG1GC -Djava.awt.headless=true
        -Dkafka.logs.dir="${2:-$CACHE}"
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
    kafka_pid_from "$KAFKA_PID"
}

kafka_pid_from() {  # pid file: prints the pid if that broker runs
    local pid
    [[ -f $1 ]] || return 1
    pid=$(<"$1")
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

# ------------------------------------------------------------- Kafka cluster ----
# Three KRaft nodes, each broker and controller, with a static quorum of the three.
# Started, killed and restarted one by one by the chaos tests; the single node above
# is not involved.

# Per run: where this start began in each node's logs (failure reports show only what
# this start wrote), and which nodes it started.
CLUSTER_OUT_START=() CLUSTER_LOG_START=() CLUSTER_STARTED=()
CLUSTER_PREPARED=0

cluster_node_dir() { printf '%s/node-%s' "$CLUSTER_DIR" "$1"; }
cluster_port() { printf '%s' $((KAFKA_PORT + 100 * $1)); }
cluster_controller_port() { printf '%s' $((KAFKA_CONTROLLER_PORT + 100 * $1)); }
cluster_node_pid() { kafka_pid_from "$(cluster_node_dir "$1")/kafka.pid"; }

cluster_check_nodes() {  # command N...
    local what=$1 n
    shift
    (( $# )) || die "which broker? usage: cluster $what N..., N in 1..${#CLUSTER_NODES[@]}"
    for n in "$@"; do
        [[ $n =~ ^[0-9]+$ ]] && (( n >= 1 && n <= ${#CLUSTER_NODES[@]} )) ||
            die "which broker? usage: cluster $what N..., N in 1..${#CLUSTER_NODES[@]} (got '$n')"
    done
}

cluster_check_ours() {  # command
    ! external_kafka_cluster ||
        die "PINLEDGER_KAFKA_CLUSTER=$PINLEDGER_KAFKA_CLUSTER is not this script's cluster:
        'cluster $1' works on its own brokers only ($OWN_KAFKA_CLUSTER). Unset the variable."
}

# Tools, jars and the cluster id, once per run and only when a node must start.
cluster_prepare() {
    (( CLUSTER_PREPARED )) && return 0
    mkdir -p "$CLUSTER_DIR"
    kafka_ensure_tools
    kafka_ensure_libs
    cluster_ensure_id
    CLUSTER_PREPARED=1
}

# All three nodes must be formatted with the same id: generated once and kept.
cluster_ensure_id() {
    local n meta id=
    if [[ ! -s $CLUSTER_ID_FILE ]]; then
        # The id file is gone but nodes were formatted: keep their id, or a node
        # formatted now could never join them.
        for n in "${CLUSTER_NODES[@]}"; do
            meta=$(cluster_node_dir "$n")/data/meta.properties
            if [[ -f $meta ]]; then
                id=$(sed -n 's/^cluster\.id=//p' "$meta")
                [[ -n $id ]] && break
            fi
        done
        if [[ -z $id ]]; then
            kafka_jvm_opts "$CLUSTER_HEAP" "$CLUSTER_DIR"
            id=$(java "${KAFKA_JVM[@]}" kafka.tools.StorageTool random-uuid)
        fi
        printf '%s\n' "$id" >"$CLUSTER_ID_FILE"
    fi
    CLUSTER_ID=$(<"$CLUSTER_ID_FILE")
}

# server.properties with every key that cluster.properties or the node sets commented
# out (and the single node's controller.quorum.bootstrap.servers), then those lines:
# each key once, so the file says what the broker runs with.
cluster_write_config() {  # N
    local n=$1 dir
    dir=$(cluster_node_dir "$n")
    mkdir -p "$dir/data"
    cat >"$dir/node.properties" <<EOF
node.id=$n
listeners=PLAINTEXT://$KAFKA_HOST:$(cluster_port "$n"),CONTROLLER://$KAFKA_HOST:$(cluster_controller_port "$n")
advertised.listeners=PLAINTEXT://$KAFKA_HOST:$(cluster_port "$n")
controller.quorum.voters=$CLUSTER_VOTERS
log.dirs=$dir/data
EOF
    {
        printf '# Generated by stack/stack.sh for cluster node %s from stack/kafka/server.properties,\n' "$n"
        printf '# stack/kafka/cluster.properties and the node'"'"'s own settings. Do not edit.\n\n'
        awk '
            function key_of(line) {
                if (line ~ /^[[:space:]]*([#!]|$)/) return ""
                sub(/^[[:space:]]+/, "", line)
                sub(/[[:space:]]*[=:].*/, "", line)
                return line
            }
            BEGIN { removed["controller.quorum.bootstrap.servers"] = 1 }
            # Every file but the last (the template) holds overrides.
            FILENAME != ARGV[ARGC - 1] { k = key_of($0); if (k != "") drop[k] = 1; next }
            { k = key_of($0) }
            k in removed { print "# (removed for the cluster) " $0; next }
            k in drop { print "# (set below for the cluster) " $0; next }
            { print }
        ' "$STACK_DIR/kafka/cluster.properties" "$dir/node.properties" \
            "$STACK_DIR/kafka/server.properties"
        printf '\n# ---- from stack/kafka/cluster.properties\n'
        cat "$STACK_DIR/kafka/cluster.properties"
        printf '\n# ---- node %s (stack/stack.sh)\n' "$n"
        cat "$dir/node.properties"
    } >"$dir/server.properties"
}

cluster_format_once() {  # N
    local n=$1 dir have
    dir=$(cluster_node_dir "$n")
    if [[ -f $dir/data/meta.properties ]]; then
        have=$(sed -n 's/^cluster\.id=//p' "$dir/data/meta.properties")
        [[ $have == "$CLUSTER_ID" ]] && return 0
        die "broker $n's storage ($dir/data) belongs to cluster '$have', not '$CLUSTER_ID' ($CLUSTER_ID_FILE).
        Start the cluster over (deletes its topics): bash stack/stack.sh cluster down && rm -rf '$CLUSTER_DIR'"
    fi
    say "formatting broker $n's storage in $dir/data (cluster id $CLUSTER_ID)"
    # No --standalone: the quorum is static (controller.quorum.voters).
    java "${KAFKA_JVM[@]}" kafka.tools.StorageTool format \
        -t "$CLUSTER_ID" -c "$dir/server.properties" >&2 ||
        die "formatting broker $n's storage failed (see above; log: $dir/kafka.log)"
}

# Starts broker N unless it runs; cluster_wait waits for it.
cluster_start_node() {  # N
    local n=$1 dir pid port cport
    dir=$(cluster_node_dir "$n")
    port=$(cluster_port "$n")
    cport=$(cluster_controller_port "$n")
    if pid=$(cluster_node_pid "$n"); then
        say "broker $n already running (pid $pid) on $KAFKA_HOST:$port"
        return 0
    fi
    rm -f "$dir/kafka.pid"
    if port_open "$KAFKA_HOST" "$port" || port_open "$KAFKA_HOST" "$cport"; then
        die "port $port or $cport (cluster broker $n) is already in use by a process this script did not start.
        See: ss -ltnp | grep -E ':(${port}|${cport})\\b'"
    fi
    cluster_prepare
    mkdir -p "$dir"
    kafka_jvm_opts "$CLUSTER_HEAP" "$dir"
    cluster_write_config "$n"
    cluster_format_once "$n"
    say "starting cluster broker $n on $KAFKA_HOST:$port (controller $KAFKA_HOST:$cport)"
    printf '=== %s stack.sh: starting Kafka %s cluster node %s\n' \
        "$(date -u +%FT%TZ)" "$KAFKA_VERSION" "$n" >>"$dir/kafka.out"
    CLUSTER_OUT_START[n]=$(stat -c %s "$dir/kafka.out")
    CLUSTER_LOG_START[n]=$(stat -c %s "$dir/kafka.log" 2>/dev/null || echo 0)
    # setsid: as for the single node, the broker outlives the shell that started it.
    nohup setsid java "${KAFKA_JVM[@]}" kafka.Kafka "$dir/server.properties" \
        >>"$dir/kafka.out" 2>&1 </dev/null &
    printf '%s\n' "$!" >"$dir/kafka.pid"
    CLUSTER_STARTED+=("$n")
}

# The ids of the brokers a metadata request lists (registered and not fenced), on one
# line; fails when no broker answers.
cluster_brokers() {  # bootstrap
    python3 - "$1" <<'PY' 2>/dev/null
import sys
from kafka import KafkaAdminClient
# 5 s at most per check (bootstrap waits 30 s by default), so waits keep to their limit.
admin = KafkaAdminClient(bootstrap_servers=sys.argv[1].split(","), request_timeout_ms=5000,
                         bootstrap_timeout_ms=5000, client_id="pinledger-stack-check")
try:
    brokers = admin.describe_cluster()["brokers"]
finally:
    admin.close()
print(" ".join(sorted(str(b["broker_id"]) for b in brokers if not b.get("is_fenced"))))
PY
}

# A node started by this run logs this once it is registered and unfenced. Metadata
# alone is not enough after a crash: it lists the dead incarnation until the
# controller's session timeout (9 s) fences it.
cluster_node_started() {  # N
    local log from=${CLUSTER_LOG_START[$1]:-0}
    log=$(cluster_node_dir "$1")/kafka.log
    [[ -f $log ]] || return 1
    (( $(stat -c %s "$log") >= from )) || from=0
    # Process substitution, not a pipe: see kafka_logged_started.
    grep -q 'Kafka Server started' < <(tail -c +"$((from + 1))" "$log")
}

# Until a metadata request lists each of these brokers (our own cluster), or three
# brokers (a cluster named by PINLEDGER_KAFKA_CLUSTER), and the ones this run started
# say they started. A node of ours that is not running fails at once, with its log.
cluster_wait() {  # bootstrap [node...]
    local bootstrap=$1 listed= n ids missing deadline=$((SECONDS + TIMEOUT))
    shift
    missing=("$@")
    python3 -c 'import kafka' 2>/dev/null ||
        die "checking the cluster needs kafka-python: pip install -e . (or pip install kafka-python)"
    while :; do
        for n in "$@"; do
            cluster_node_pid "$n" >/dev/null || cluster_fail "cluster broker $n is not running (exited during startup?)" "$n"
        done
        if listed=$(cluster_brokers "$bootstrap"); then
            missing=()
            for n in "$@"; do
                if [[ " $listed " != *" $n "* ]] ||
                    { [[ " ${CLUSTER_STARTED[*]} " == *" $n "* ]] && ! cluster_node_started "$n"; }; then
                    missing+=("$n")
                fi
            done
            if (( $# == 0 )); then
                read -ra ids <<<"$listed"
                (( ${#ids[@]} >= ${#CLUSTER_NODES[@]} )) && break
            elif (( ${#missing[@]} == 0 )); then
                break
            fi
        else
            listed="(no broker answered)"
        fi
        if (( SECONDS >= deadline )); then
            (( $# )) || die "the Kafka cluster at PINLEDGER_KAFKA_CLUSTER=$bootstrap did not list ${#CLUSTER_NODES[@]} brokers within ${TIMEOUT}s (it lists: ${listed:-none}).
        Check its brokers run, or unset PINLEDGER_KAFKA_CLUSTER to let this script run its own."
            cluster_fail "broker(s) ${missing[*]} did not join the cluster within ${TIMEOUT}s (metadata lists: ${listed:-none}; brokers running: $(cluster_running_ids))" "${missing[@]}"
        fi
        sleep 1
    done
}

cluster_fail() {  # message node...
    printf '[stack] ERROR: %s\n' "$1" >&2
    shift
    local n dir
    for n in "$@"; do
        dir=$(cluster_node_dir "$n")
        kafka_tail_since "$dir/kafka.out" "${CLUSTER_OUT_START[n]:-0}"
        kafka_tail_since "$dir/kafka.log" "${CLUSTER_LOG_START[n]:-0}"
    done
    cat >&2 <<EOF
[stack] What to do: read the log(s) above; 'bash stack/stack.sh cluster status' shows each broker.
[stack]   a broker joins only while 2 of the 3 controllers run: start the others too
[stack]   ports taken:  ss -ltnp | grep -E ':19[1-3]9[23]\\b'
[stack]   JVM flags or memory: PINLEDGER_KAFKA_CLUSTER_HEAP (now '$CLUSTER_HEAP')
[stack]   storage formatted for another cluster id: bash stack/stack.sh cluster down && rm -rf '$CLUSTER_DIR'
[stack]   (that deletes the cluster's topics) and run 'cluster up' again.
EOF
    exit 1
}

cluster_up() {
    local n
    for n in "${CLUSTER_NODES[@]}"; do
        cluster_start_node "$n"
    done
    (( ${#CLUSTER_STARTED[@]} == 0 )) || say "waiting for the ${#CLUSTER_NODES[@]} brokers to form the cluster"
    cluster_wait "$OWN_KAFKA_CLUSTER" "${CLUSTER_NODES[@]}"
    say "Kafka cluster is up: $OWN_KAFKA_CLUSTER (data and logs in $CLUSTER_DIR/node-N)"
}

# Several at once when all of them are down: a broker joins only while 2 of the 3
# controllers run, so each waits for the others.
cluster_start() {  # N...
    local n
    for n in "$@"; do
        cluster_start_node "$n"
    done
    cluster_wait "$OWN_KAFKA_CLUSTER" "$@"
    say "broker(s) $* in the cluster"
}

# SIGKILL: a crash, no controlled shutdown.
cluster_kill() {  # N
    local n=$1 pid deadline=$((SECONDS + 10))
    if ! pid=$(cluster_node_pid "$n"); then
        say "cluster broker $n is not running"
        return 0
    fi
    say "killing cluster broker $n (pid $pid) with SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    # Until the process is gone or a zombie: its ports are free then. (Its cmdline
    # empties before its sockets close, so kafka_pid_from says "stopped" too soon.)
    while kill -0 "$pid" 2>/dev/null && [[ $(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null) != Z ]]; do
        (( SECONDS < deadline )) || die "cluster broker $n (pid $pid) still runs 10s after SIGKILL"
        sleep 0.1
    done
    rm -f "$(cluster_node_dir "$n")/kafka.pid"
}

# All at once: stopped one by one, the last two would each wait for a quorum that
# is going away.
cluster_down() {
    local n pid pids=() deadline=$((SECONDS + 60))
    for n in "${CLUSTER_NODES[@]}"; do
        if pid=$(cluster_node_pid "$n"); then
            say "stopping cluster broker $n (pid $pid)"
            kill -TERM "$pid"
            pids[n]=$pid
        fi
    done
    (( ${#pids[@]} )) || say "Kafka cluster not running"
    for n in "${!pids[@]}"; do
        while kill -0 "${pids[n]}" 2>/dev/null && cluster_node_pid "$n" >/dev/null; do
            if (( SECONDS >= deadline )); then
                say "cluster broker $n did not stop within 60s: killing it"
                kill -KILL "${pids[n]}" 2>/dev/null || true
                break
            fi
            sleep 0.5
        done
    done
    for n in "${CLUSTER_NODES[@]}"; do
        rm -f "$(cluster_node_dir "$n")/kafka.pid"
    done
}

cluster_running_ids() {
    local n ids=()
    for n in "${CLUSTER_NODES[@]}"; do
        if cluster_node_pid "$n" >/dev/null; then ids+=("$n"); fi
    done
    printf '%s' "${ids[*]:-none}"
}

cluster_running_count() {
    local n count=0
    for n in "${CLUSTER_NODES[@]}"; do
        cluster_node_pid "$n" >/dev/null && count=$((count + 1))
    done
    printf '%s' "$count"
}

cluster_status() {
    local n pid rc=0
    for n in "${CLUSTER_NODES[@]}"; do
        if pid=$(cluster_node_pid "$n"); then
            echo "kafka cluster broker $n: running (pid $pid, $KAFKA_HOST:$(cluster_port "$n"), $(cluster_node_dir "$n"))"
        else
            echo "kafka cluster broker $n: stopped"
            rc=1
        fi
    done
    return $rc
}

print_cluster_env() {
    local value=${PINLEDGER_KAFKA_CLUSTER:-$OWN_KAFKA_CLUSTER}
    # %q would escape the commas, which need none: keep the line readable.
    if [[ $value =~ ^[A-Za-z0-9.:,_-]+$ ]]; then
        printf 'export PINLEDGER_KAFKA_CLUSTER=%s\n' "$value"
    else
        printf 'export PINLEDGER_KAFKA_CLUSTER=%q\n' "$value"
    fi
}

cmd_cluster() {
    local what=${1:-} n
    shift || true
    case $what in
        up)
            if external_kafka_cluster; then
                say "PINLEDGER_KAFKA_CLUSTER is set: not starting a cluster, checking it answers"
                cluster_wait "$PINLEDGER_KAFKA_CLUSTER"
            else
                cluster_up
            fi
            print_cluster_env
            ;;
        down)
            if external_kafka_cluster; then
                say "PINLEDGER_KAFKA_CLUSTER=$PINLEDGER_KAFKA_CLUSTER is not ours: leaving it alone"
            else
                cluster_down
            fi
            ;;
        status) cluster_status ;;
        kill)
            cluster_check_nodes kill "$@"; cluster_check_ours kill
            for n in "$@"; do cluster_kill "$n"; done
            ;;
        start) cluster_check_nodes start "$@"; cluster_check_ours start; cluster_start "$@" ;;
        env) print_cluster_env ;;
        *) usage ;;
    esac
}

# ------------------------------------------------------------------ commands ----

print_env() {
    printf 'export PINLEDGER_KAFKA=%q\n' "${PINLEDGER_KAFKA:-$OWN_KAFKA}"
    printf 'export PINLEDGER_PG_DSN=%q\n' "${PINLEDGER_PG_DSN:-$OWN_PG_DSN}"
    printf 'export PINLEDGER_MYSQL_DSN=%q\n' "${PINLEDGER_MYSQL_DSN:-$OWN_MYSQL_DSN}"
    if (( KAFKA_BROKERS == 3 )); then print_cluster_env; fi
}

check_brokers_setting() {
    [[ $KAFKA_BROKERS == 1 || $KAFKA_BROKERS == 3 ]] ||
        die "PINLEDGER_KAFKA_BROKERS=$KAFKA_BROKERS: use 1 (the single node only) or 3 (the cluster too)"
}

cmd_up() {
    mkdir -p "$CACHE"
    if external_pg; then
        say "PINLEDGER_PG_DSN is set: not starting PostgreSQL, checking it answers"
        pg_wait_dsn "$PINLEDGER_PG_DSN"
    else
        pg_up
    fi
    if external_mysql; then
        say "PINLEDGER_MYSQL_DSN is set: not starting MariaDB, checking it answers"
        mariadb_wait_external "$PINLEDGER_MYSQL_DSN"
    else
        mariadb_up
    fi
    if external_kafka; then
        say "PINLEDGER_KAFKA is set: not starting Kafka, checking it answers"
        kafka_wait "$PINLEDGER_KAFKA"
    else
        kafka_up
    fi
    if (( KAFKA_BROKERS == 3 )); then
        if external_kafka_cluster; then
            say "PINLEDGER_KAFKA_CLUSTER is set: not starting a cluster, checking it answers"
            cluster_wait "$PINLEDGER_KAFKA_CLUSTER"
        else
            cluster_up
        fi
    fi
    say "stack is up. Logs: bash stack/stack.sh logs"
    say "set these in your shell with: eval \"\$(bash stack/stack.sh env)\""
    print_env
}

cmd_down() {
    # The cluster too when it runs: it holds three JVMs' memory.
    if external_kafka_cluster; then
        (( KAFKA_BROKERS == 1 )) || say "PINLEDGER_KAFKA_CLUSTER is not ours: leaving it alone"
    elif (( KAFKA_BROKERS == 3 || $(cluster_running_count) > 0 )); then
        cluster_down
    fi
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
    if external_mysql; then
        say "PINLEDGER_MYSQL_DSN is not ours: leaving that server alone"
    else
        mariadb_down
    fi
}

cmd_status() {
    local rc=0
    pg_status || rc=1
    mariadb_status || rc=1
    kafka_status || rc=1
    # The cluster counts only when asked for; otherwise it is shown if it runs.
    if (( KAFKA_BROKERS == 3 )); then
        cluster_status || rc=1
    elif (( $(cluster_running_count) > 0 )); then
        cluster_status || true
    fi
    external_pg && echo "(PINLEDGER_PG_DSN is set: the app uses $PINLEDGER_PG_DSN)"
    external_mysql && echo "(PINLEDGER_MYSQL_DSN is set: the MySQL store uses $PINLEDGER_MYSQL_DSN)"
    external_kafka && echo "(PINLEDGER_KAFKA is set: the app uses $PINLEDGER_KAFKA)"
    return $rc
}

# `pg kill`: an immediate shutdown, the nearest to a crash that leaves no stray
# process: every server process stops at once, open connections break, nothing is
# checkpointed, and the next start recovers from the WAL. `pg start` brings it back.
cmd_pg() {
    local what=${1:-} ver
    if external_pg; then
        die "PINLEDGER_PG_DSN=$PINLEDGER_PG_DSN is not ours: 'pg $what' acts only on this script's PostgreSQL"
    fi
    case $what in
        kill)
            ver=$(pg_cluster_version)
            if [[ -n $ver ]] && pg_cluster_running "$ver"; then
                say "killing PostgreSQL $ver/$PG_CLUSTER (immediate shutdown)"
                as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$PG_CLUSTER" stop -m immediate >&2
            else
                say "PostgreSQL cluster '$PG_CLUSTER' not running"
            fi
            ;;
        start) pg_up ;;
        *) usage ;;
    esac
}

cmd_logs() {
    local follow=() ver pglog files=()
    [[ ${1:-} == -f ]] && follow=(-f)
    ver=$(pg_cluster_version)
    [[ -n $ver ]] && pglog=$(pg_log_file "$ver") && [[ -n $pglog ]] && files+=("$pglog")
    mariadb_paths
    [[ -f $MARIADB_LOG ]] && files+=("$MARIADB_LOG")
    [[ -f $KAFKA_OUT ]] && files+=("$KAFKA_OUT")
    [[ -f $KAFKA_LOG ]] && files+=("$KAFKA_LOG")
    (( ${#files[@]} )) || die "no logs yet (run 'up' first)"
    as_root tail -n "${LINES_SHOWN:-50}" "${follow[@]}" "${files[@]}"
}

usage() {
    sed -n '2,30p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

check_brokers_setting
mariadb_paths
case ${1:-} in
    up) cmd_up ;;
    down) cmd_down ;;
    status) cmd_status ;;
    logs) shift; cmd_logs "$@" ;;
    env) print_env ;;
    cluster) shift; cmd_cluster "$@" ;;
    pg) shift; cmd_pg "$@" ;;
    *) usage ;;
esac
