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
# A Kafka node that takes TLS clients only (for the security tests), on 127.0.0.1:19592
# (SASL_SSL: SCRAM-SHA-256/512 and PLAIN users) and 19593 (SSL with client
# certificates), with a Postgres (127.0.0.1:54339) and a MariaDB (127.0.0.1:33079) that
# take TLS clients only; the CA, certificates and passwords are made by the script in
# the cache:
#   bash stack/stack.sh secure up        start them (idempotent), print the export lines
#                                        that point pinledger at the node over SASL_SSL,
#                                        and the DSNs of the two databases
#   bash stack/stack.sh secure down      stop them (`down` stops them too)
#   bash stack/stack.sh secure status    running/stopped for each
#   bash stack/stack.sh secure env       print the export lines only
#
#   bash stack/stack.sh pg kill          crash the stack's PostgreSQL (immediate stop)
#   bash stack/stack.sh pg start         start it again and wait until it answers
#   bash stack/stack.sh mariadb kill     crash the stack's MariaDB (SIGKILL)
#   bash stack/stack.sh mariadb start    start it again and wait until it answers
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
#
# This file is the entry point and the commands; each component is its own file
# beside it, sourced here: lib.sh (settings and helpers), install.sh (the Debian
# packages, also run by itself: `bash stack/install.sh`), postgres.sh, mariadb.sh,
# kafka.sh (the single node) and cluster.sh (the three-broker cluster).
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=install.sh
source "$STACK_DIR/install.sh"
# shellcheck source=postgres.sh
source "$STACK_DIR/postgres.sh"
# shellcheck source=mariadb.sh
source "$STACK_DIR/mariadb.sh"
# shellcheck source=kafka.sh
source "$STACK_DIR/kafka.sh"
# shellcheck source=cluster.sh
source "$STACK_DIR/cluster.sh"
# shellcheck source=secure.sh
source "$STACK_DIR/secure.sh"
# shellcheck source=secure_stores.sh
source "$STACK_DIR/secure_stores.sh"

# 1 (the default): `up` starts the single node only; 3: the cluster as well.
KAFKA_BROKERS=${PINLEDGER_KAFKA_BROKERS:-1}

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
    if secure_running; then secure_down; fi
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

# `mariadb kill`: SIGKILL, a crash (InnoDB recovers from its redo log on the next start);
# `mariadb start` brings it back. The chaos suite's shard fault (a store shard down).
cmd_mariadb() {
    local what=${1:-} pid
    if external_mysql; then
        die "PINLEDGER_MYSQL_DSN=$PINLEDGER_MYSQL_DSN is not ours: 'mariadb $what' acts only on this script's MariaDB"
    fi
    case $what in
        kill)
            if pid=$(mariadb_pid); then
                say "killing ${MARIADB_NAME} (pid $pid, SIGKILL)"
                kill -KILL "$pid"
                while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
            else
                say "${MARIADB_NAME} not running"
            fi
            ;;
        start) mariadb_up ;;
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
    sed -n '2,44p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
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
    secure) shift; cmd_secure "$@" ;;
    pg) shift; cmd_pg "$@" ;;
    mariadb) shift; cmd_mariadb "$@" ;;
    *) usage ;;
esac
