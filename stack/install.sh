#!/usr/bin/env bash
# The Debian packages that the stack, the tests and the lint need: the one list.
#
#   bash stack/install.sh           install whichever of them is missing
#   bash stack/install.sh NAME...   only these (e.g. `shellcheck`, which `make lint` runs)
#
# A package counts as there when its command (or file) is: with everything installed
# this runs no apt at all. .ci/run runs it on a fresh machine; stack.sh sources it, and
# each component installs what it needs when it first starts (install_missing postgres).
# Debian's package lists may be stale or absent on a fresh machine: `apt-get update`
# runs only when a plain install fails.
# shellcheck source-path=SCRIPTDIR

# NAME:package, NAME being what `installed` looks for.
STACK_PACKAGES=(
    java:openjdk-17-jre-headless  # Kafka (kafka.sh, cluster.sh)
    mvn:maven                     # resolves Kafka's jars from stack/pom.xml
    # psql alone (postgresql-client) is not enough: the stack needs the server.
    postgres:postgresql
    mariadbd:mariadb-server       # the MySQL store's tests (mariadb.sh)
    # The interop tests (tests/integration/test_interop.py) compile a Java client with
    # javac on code that the Thrift compiler generates, against Debian's libthrift jar.
    javac:openjdk-17-jdk-headless
    thrift:thrift-compiler
    libthrift-java:libthrift-java
    make:make
    # The dashboard's browser tests (tests/browser) drive headless Chromium through Selenium.
    chromium:chromium
    chromedriver:chromium-driver
    shellcheck:shellcheck         # make lint
    openssl:openssl               # the secure stack's CA and certificates (secure.sh)
    # tests/deploy check the systemd units with `systemd-analyze verify` (installed
    # everywhere systemd is the init; in a container it only brings the command).
    systemd-analyze:systemd
    # The container image (make image, tests/integration/test_image.py): podman runs
    # here only with runc (crun fails on this kernel's cgroups); mmdebstrap makes the
    # base from Debian's packages, as no image registry is reachable.
    podman:podman
    runc:runc
    mmdebstrap:mmdebstrap
)
# Not in the full install: `up` wants the client alone only to check a MySQL server
# named by PINLEDGER_MYSQL_DSN (mariadb-server brings it too).
STACK_EXTRA_PACKAGES=(mariadb:mariadb-client)

installed() {  # NAME
    case $1 in
        postgres)
            command -v pg_ctlcluster >/dev/null &&
                compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null
            ;;
        mariadbd) [[ -x /usr/sbin/mariadbd ]] ;;
        libthrift-java) [[ -f /usr/share/java/thrift.jar ]] ;;
        *) command -v "$1" >/dev/null ;;
    esac
}

package_of() {  # NAME: prints its package
    local entry
    for entry in "${STACK_PACKAGES[@]}" "${STACK_EXTRA_PACKAGES[@]}"; do
        if [[ ${entry%%:*} == "$1" ]]; then
            printf '%s' "${entry#*:}"
            return 0
        fi
    done
    die "no package for '$1' in stack/install.sh (one of: ${STACK_PACKAGES[*]%%:*} ${STACK_EXTRA_PACKAGES[*]%%:*})"
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

# Installs the packages of the NAMEs that are not there, in one apt run; no apt at all
# when all are. The caller checks what it needs afterwards.
install_missing() {  # NAME...
    local name package missing=()
    for name in "$@"; do
        installed "$name" && continue
        package=$(package_of "$name") || exit 1
        missing+=("$package")
    done
    (( ${#missing[@]} == 0 )) || apt_install "${missing[@]}"
}

install_main() {
    local names=("$@") name absent=()
    if (( ${#names[@]} == 0 )); then names=("${STACK_PACKAGES[@]%%:*}"); fi
    install_missing "${names[@]}"
    for name in "${names[@]}"; do
        installed "$name" || absent+=("$name")
    done
    (( ${#absent[@]} == 0 )) || die "still missing after apt-get install: ${absent[*]}"
    say "all present: ${names[*]}"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    set -euo pipefail
    # shellcheck source=lib.sh
    source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
    install_main "$@"
fi
