# shellcheck shell=bash
# The secure stack's Postgres and MariaDB (`stack.sh secure ...`, beside the secure Kafka
# of secure.sh): each takes TLS clients only, with a certificate signed by the secure
# stack's CA (<cache>/secure/tls/db.pem, names 127.0.0.1 and localhost), and a user
# whose password is made at random (secure_secret):
#   Postgres on 127.0.0.1:54339: the Debian cluster `pinledger-secure` (pg_hba: hostssl
#            with scram-sha-256, hostnossl rejected)
#   MariaDB  on 127.0.0.1:33079: a second private mariadbd (require_secure_transport)
# Sourced by stack/stack.sh after postgres.sh, mariadb.sh and secure.sh, whose helpers
# (pg_*, mariadb_*, secure_secret, secure_certs) these are built on.

SECURE_PG_CLUSTER=pinledger-secure
SECURE_PG_PORT=54339
SECURE_MY_PORT=33079
SECURE_DB_USER=pinledger
SECURE_DB=pinledger

secure_ca() { printf '%s' "$SECURE_TLS/ca.pem"; }

# The DSNs that reach them verifying the server's certificate and its name. The
# passwords are hex (URL-safe); the CA's path is percent-encoded where it must be.
secure_url_path() { python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$1"; }

secure_pg_dsn() {
    printf 'postgresql://%s:%s@127.0.0.1:%s/%s?sslmode=verify-full&sslrootcert=%s' \
        "$SECURE_DB_USER" "$(secure_secret postgres)" "$SECURE_PG_PORT" "$SECURE_DB" \
        "$(secure_url_path "$(secure_ca)")"
}

secure_mysql_dsn() {
    printf 'mysql://%s:%s@127.0.0.1:%s/%s?ssl-mode=VERIFY_IDENTITY&ssl-ca=%s' \
        "$SECURE_DB_USER" "$(secure_secret mariadb)" "$SECURE_MY_PORT" "$SECURE_DB" \
        "$(secure_url_path "$(secure_ca)")"
}

# Copies a file where a server reads it, owned by the user it runs as (as root; else
# by whoever runs this), when it differs; SECURE_CHANGED=1 when it did.
secure_install_file() {  # owner mode source destination
    if as_root cmp -s "$3" "$4"; then return 0; fi
    if [[ $EUID -eq 0 ]]; then
        install -o "$1" -g "$1" -m "$2" "$3" "$4"
    elif [[ $1 == "$(id -un)" ]]; then
        install -m "$2" "$3" "$4"
    else
        as_root install -o "$1" -g "$1" -m "$2" "$3" "$4"
    fi
    SECURE_CHANGED=1
}

# ------------------------------------------------------------------ Postgres ----

secure_pg_up() {
    pg_ensure_server_installed
    local ver data etc
    ver=$(pg_cluster_version_of "$SECURE_PG_CLUSTER")
    if [[ -z $ver ]]; then
        ver=$(pg_installed_version)
        say "creating PostgreSQL $ver cluster '$SECURE_PG_CLUSTER' on port $SECURE_PG_PORT (TLS only)"
        as_root pg_createcluster "$ver" "$SECURE_PG_CLUSTER" --port "$SECURE_PG_PORT" \
            --start-conf manual --encoding UTF8 --locale C.UTF-8 >&2
    fi
    data=$(pg_cluster_field "$ver" "$SECURE_PG_CLUSTER" 6)
    etc=/etc/postgresql/$ver/$SECURE_PG_CLUSTER
    # The key must belong to the server's user and be readable by it alone.
    SECURE_CHANGED=0
    secure_install_file postgres 0644 "$SECURE_TLS/db.pem" "$data/server.crt"
    secure_install_file postgres 0600 "$SECURE_TLS/db.key" "$data/server.key"
    secure_install_file postgres 0644 "$STACK_DIR/postgres/pinledger-secure.conf" \
        "$etc/conf.d/pinledger-secure.conf"
    secure_install_file postgres 0640 "$STACK_DIR/postgres/pinledger-secure-hba.conf" \
        "$etc/pg_hba.conf"
    if pg_cluster_running "$ver" "$SECURE_PG_CLUSTER"; then
        if (( SECURE_CHANGED )); then
            say "its settings or certificate changed: restarting PostgreSQL $ver/$SECURE_PG_CLUSTER"
            as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$SECURE_PG_CLUSTER" restart >&2
        else
            say "secure PostgreSQL $ver/$SECURE_PG_CLUSTER already running on port $SECURE_PG_PORT"
        fi
    else
        say "starting PostgreSQL $ver/$SECURE_PG_CLUSTER: TLS only on 127.0.0.1:$SECURE_PG_PORT"
        as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$SECURE_PG_CLUSTER" start >&2 ||
            secure_pg_fail "$ver" "pg_ctlcluster could not start the cluster"
    fi
    local deadline=$((SECONDS + TIMEOUT))
    until as_postgres pg_isready -q -p "$SECURE_PG_PORT"; do
        (( SECONDS < deadline )) || secure_pg_fail "$ver" "it did not accept connections within ${TIMEOUT}s"
        sleep 0.5
    done
    # Idempotent, as for the stack's own: the role (its password the secret's), the database.
    as_postgres psql -X -q -v ON_ERROR_STOP=1 -p "$SECURE_PG_PORT" -d postgres <<SQL
SELECT format('CREATE ROLE %I', '$SECURE_DB_USER')
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$SECURE_DB_USER') \\gexec
ALTER ROLE $SECURE_DB_USER WITH LOGIN CREATEDB PASSWORD '$(secure_secret postgres)';
SELECT format('CREATE DATABASE %I OWNER %I', '$SECURE_DB', '$SECURE_DB_USER')
 WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = '$SECURE_DB') \\gexec
SQL
    # As the application connects: over TLS, verifying the certificate and its name.
    until pg_check_dsn "$(secure_pg_dsn)"; do
        (( SECONDS < deadline )) || secure_pg_fail "$ver" "'select 1' over TLS failed: $PG_CHECK_ERROR"
        sleep 0.5
    done
}

secure_pg_fail() {  # ver message
    pg_cluster_fail "$SECURE_PG_CLUSTER" "$SECURE_PG_PORT" "the secure PostgreSQL: " "$@"
}

secure_pg_running() {
    local ver
    ver=$(pg_cluster_version_of "$SECURE_PG_CLUSTER")
    [[ -n $ver ]] && pg_cluster_running "$ver" "$SECURE_PG_CLUSTER"
}

secure_pg_down() {
    local ver
    ver=$(pg_cluster_version_of "$SECURE_PG_CLUSTER")
    if [[ -n $ver ]] && pg_cluster_running "$ver" "$SECURE_PG_CLUSTER"; then
        say "stopping PostgreSQL $ver/$SECURE_PG_CLUSTER"
        as_root pg_ctlcluster --skip-systemctl-redirect "$ver" "$SECURE_PG_CLUSTER" stop >&2
    fi
}

# ------------------------------------------------------------------- MariaDB ----

# Runs a mariadb.sh function on the secure server: its own directory beside the stack's
# (<dir>-secure), port, password, settings and TLS client options, as locals that the
# function sees (bash's scoping is dynamic) and that leave the stack's own as they were.
# shellcheck disable=SC2034  # the locals are read by the mariadb.sh function called
secure_mariadb() {  # function...
    local MARIADB_DIR=$SECURE_MARIADB_DIR
    local MARIADB_DATA=$MARIADB_DIR/data MARIADB_CNF=$MARIADB_DIR/my.cnf
    local MARIADB_PID=$MARIADB_DIR/mariadb.pid MARIADB_SOCK=$MARIADB_DIR/mariadb.sock
    local MARIADB_LOG=$MARIADB_DIR/mariadb.log
    local MARIADB_NAME="the secure MariaDB"
    local MY_PORT=$SECURE_MY_PORT MY_USER=$SECURE_DB_USER MY_DB=$SECURE_DB MY_PASSWORD
    MY_PASSWORD=$(secure_secret mariadb)
    local MARIADB_CLIENT_TLS=(--ssl --ssl-ca="$MARIADB_DIR/tls/ca.pem" --ssl-verify-server-cert)
    local MARIADB_EXTRA_CNF
    MARIADB_EXTRA_CNF="$(cat "$STACK_DIR/mariadb/pinledger-secure.cnf")
ssl_cert = $MARIADB_DIR/tls/server.pem
ssl_key = $MARIADB_DIR/tls/server.key
ssl_ca = $MARIADB_DIR/tls/ca.pem"
    "$@"
}

secure_mariadb_up() {
    local owner tls=$SECURE_MARIADB_DIR/tls
    owner=$(id -un)
    mariadb_ensure_installed
    mkdir -p "$tls"
    if [[ $EUID -eq 0 ]]; then
        owner=mysql
        chown mysql:mysql "$SECURE_MARIADB_DIR" "$tls"
    fi
    SECURE_CHANGED=0
    secure_install_file "$owner" 0644 "$SECURE_TLS/db.pem" "$tls/server.pem"
    secure_install_file "$owner" 0600 "$SECURE_TLS/db.key" "$tls/server.key"
    secure_install_file "$owner" 0644 "$SECURE_TLS/ca.pem" "$tls/ca.pem"
    if (( SECURE_CHANGED )) && secure_mariadb_running; then
        say "its certificate changed: restarting the secure MariaDB"
        secure_mariadb mariadb_down
    fi
    secure_mariadb mariadb_up
}

secure_mariadb_running() { secure_mariadb mariadb_pid >/dev/null; }

# ------------------------------------------------------------------ commands ----

secure_stores_up() {
    SECURE_MARIADB_DIR=${MARIADB_DIR%/}-secure
    [[ -f $SECURE_TLS/ca.pem ]] || secure_certs
    secure_db_cert
    secure_pg_up
    secure_mariadb_up
}

secure_stores_down() {
    SECURE_MARIADB_DIR=${MARIADB_DIR%/}-secure
    secure_pg_down
    if secure_mariadb_running; then secure_mariadb mariadb_down; fi
}

secure_stores_running() {  # exit 0 when either runs
    SECURE_MARIADB_DIR=${MARIADB_DIR%/}-secure
    secure_pg_running || secure_mariadb_running
}

secure_stores_status() {
    local rc=0 pid
    SECURE_MARIADB_DIR=${MARIADB_DIR%/}-secure
    if secure_pg_running; then
        echo "secure postgres: running ($SECURE_PG_CLUSTER, TLS only on 127.0.0.1:$SECURE_PG_PORT)"
    else
        echo "secure postgres: stopped"; rc=1
    fi
    if pid=$(secure_mariadb mariadb_pid); then
        echo "secure mariadb: running (pid $pid, TLS only on 127.0.0.1:$SECURE_MY_PORT, data in $SECURE_MARIADB_DIR/data)"
    else
        echo "secure mariadb: stopped"; rc=1
    fi
    return $rc
}

secure_stores_env() {
    printf 'export PINLEDGER_SECURE_PG_DSN=%q\n' "$(secure_pg_dsn)"
    printf 'export PINLEDGER_SECURE_MYSQL_DSN=%q\n' "$(secure_mysql_dsn)"
}
