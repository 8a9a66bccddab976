# shellcheck shell=bash
# The stack's MariaDB, for the MySQL projection store: a private server on
# 127.0.0.1:33069. Sourced by stack/stack.sh after lib.sh and install.sh.

# The private MariaDB server of the MySQL projection store (the port must match
# stack/mariadb/pinledger.cnf's).
MY_PORT=33069
MY_USER=pinledger
MY_PASSWORD=pinledger
MY_DB=pinledger
MARIADB_CLIENT_TLS=()
# What the messages call it (the secure one: secure_stores.sh).
MARIADB_NAME=MariaDB
OWN_MYSQL_DSN=mysql://$MY_USER:$MY_PASSWORD@127.0.0.1:$MY_PORT/$MY_DB

external_mysql() { [[ -n ${PINLEDGER_MYSQL_DSN:-} && $PINLEDGER_MYSQL_DSN != "$OWN_MYSQL_DSN" ]]; }

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
    install_missing mariadbd
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

# MARIADB_EXTRA_CNF (the secure server's, secure_stores.sh): lines appended after the
# template's, which win over the template's own.
mariadb_write_config() {
    mkdir -p "$MARIADB_DIR"
    {
        cat "$STACK_DIR/mariadb/pinledger.cnf"
        printf '\n# Added by stack/stack.sh\ndatadir = %s\nsocket = %s\npid-file = %s\nlog-error = %s\n' \
            "$MARIADB_DATA" "$MARIADB_SOCK" "$MARIADB_PID" "$MARIADB_LOG"
        if [[ -n ${MARIADB_EXTRA_CNF:-} ]]; then printf '%s\n' "$MARIADB_EXTRA_CNF"; fi
    } >"$MARIADB_CNF"
    if [[ $EUID -eq 0 ]]; then chown mysql:mysql "$MARIADB_DIR"; fi
}

mariadb_install_once() {
    [[ -d $MARIADB_DATA/mysql ]] && return 0
    say "creating the ${MARIADB_NAME} data directory $MARIADB_DATA"
    rm -rf "$MARIADB_DATA"
    mariadb-install-db --defaults-file="$MARIADB_CNF" "${MARIADB_USER_ARGS[@]}" \
        --datadir="$MARIADB_DATA" --skip-test-db --auth-root-authentication-method=socket \
        >>"$MARIADB_DIR/install.log" 2>&1 ||
        { tail -n 30 "$MARIADB_DIR/install.log" >&2; die "mariadb-install-db failed (log above: $MARIADB_DIR/install.log)"; }
}

# The admin connection: over the socket as the OS user that installed the data
# directory (root, or yourself), authenticated by unix_socket. The SQL on stdin.
mariadb_admin_sql() {
    mariadb --no-defaults --protocol=socket --socket="$MARIADB_SOCK" -u "$(id -un)"
}

mariadb_up() {
    mariadb_paths
    local pid
    if pid=$(mariadb_pid); then
        say "${MARIADB_NAME} already running (pid $pid) on 127.0.0.1:$MY_PORT"
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
        say "starting ${MARIADB_NAME} ($(/usr/sbin/mariadbd --version | awk '{print $3}')) on 127.0.0.1:$MY_PORT, data in $MARIADB_DATA"
        MARIADB_LOG_START=$(stat -c %s "$MARIADB_LOG" 2>/dev/null || echo 0)
        # setsid: its own session, so the server outlives the shell that ran `up`.
        nohup setsid /usr/sbin/mariadbd --defaults-file="$MARIADB_CNF" "${MARIADB_USER_ARGS[@]}" \
            >>"$MARIADB_DIR/mariadbd.out" 2>&1 </dev/null &
        pid=$!
    fi
    local deadline=$((SECONDS + TIMEOUT))
    until mariadb-admin --no-defaults --protocol=socket --socket="$MARIADB_SOCK" -u "$(id -un)" \
        ping >/dev/null 2>&1; do
        kill -0 "$pid" 2>/dev/null || mariadb_fail "${MARIADB_NAME} exited during startup"
        (( SECONDS < deadline )) || mariadb_fail "${MARIADB_NAME} did not answer within ${TIMEOUT}s"
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

# Connects the way the application will: over TCP with the password (and over TLS,
# verifying the server, with MARIADB_CLIENT_TLS: the secure server's).
mariadb_wait_dsn() {  # user password host port db
    local deadline=$((SECONDS + TIMEOUT)) err
    until err=$(MYSQL_PWD=$2 mariadb --no-defaults --protocol=tcp -u "$1" -h "$3" -P "$4" \
        "${MARIADB_CLIENT_TLS[@]}" "$5" -e 'select 1' 2>&1 >/dev/null); do
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
    install_missing mariadb
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
        say "${MARIADB_NAME} not running"
        return 0
    fi
    say "stopping ${MARIADB_NAME} (pid $pid)"
    kill -TERM "$pid"
    while kill -0 "$pid" 2>/dev/null; do
        if (( SECONDS >= deadline )); then
            say "${MARIADB_NAME} did not stop within 60s: killing it"
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
