# shellcheck shell=bash
# The stack's single-node KRaft Kafka (broker and controller), jars from Maven Central,
# on 127.0.0.1:19092. Sourced by stack/stack.sh after lib.sh and install.sh; cluster.sh
# builds on it.

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
OWN_KAFKA=$KAFKA_HOST:$KAFKA_PORT

external_kafka() { [[ -n ${PINLEDGER_KAFKA:-} && $PINLEDGER_KAFKA != "$OWN_KAFKA" ]]; }

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
    install_missing java mvn
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
    kafka_jvm_opts "$KAFKA_HEAP" "$CACHE"
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
    kafka_stop "Kafka" "$KAFKA_PID"
}

# Stops the broker of a pid file (the single node's, the secure node's).
kafka_stop() {  # name pid-file
    local name=$1 pid_file=$2 pid
    if ! pid=$(kafka_pid_from "$pid_file"); then
        say "$name not running"
        rm -f "$pid_file"
        return 0
    fi
    say "stopping $name (pid $pid)"
    kill -TERM "$pid"
    # A clean shutdown flushes logs and writes the clean-shutdown marker, so the
    # next start skips log recovery. Give it time before forcing.
    local deadline=$((SECONDS + 60))
    while kill -0 "$pid" 2>/dev/null; do
        if (( SECONDS >= deadline )); then
            say "$name did not stop within 60s: killing it"
            kill -KILL "$pid" 2>/dev/null || true
            break
        fi
        sleep 0.5
    done
    rm -f "$pid_file"
}

kafka_status() {
    local pid
    if pid=$(kafka_pid); then
        echo "kafka:    running (pid $pid, $OWN_KAFKA, data $KAFKA_DATA)"
    else
        echo "kafka:    stopped"; return 1
    fi
}
