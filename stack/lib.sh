# shellcheck shell=bash
# shellcheck disable=SC2034  # the settings here are read by the component files
# Common settings and helpers of the stack's scripts, sourced by stack/stack.sh (and by
# stack/install.sh when run by itself) before the component files.

STACK_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${PINLEDGER_CACHE:-$HOME/.cache/pinledger}

TIMEOUT=${PINLEDGER_STACK_TIMEOUT:-120}

say() { printf '[stack] %s\n' "$*" >&2; }
die() { printf '[stack] ERROR: %s\n' "$*" >&2; exit 1; }

# With no terminal on stdin (CI runs with none) sudo must not wait for a password: -n
# makes it fail at once instead.
as_root() {
    if [[ $EUID -eq 0 ]]; then
        "$@"
    elif [[ -t 0 ]]; then
        sudo "$@"
    else
        sudo -n "$@"
    fi
}

port_open() {  # host port
    timeout 2 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null
}
