#!/usr/bin/env bash
# Builds the container image (`make image`): the Containerfile at the repository root,
# tagged pinledger:<version> and pinledger:latest.
#
#   bash deploy/image/build.sh
#
# The engine: docker where it works (a daemon answers), else Debian's podman (installed
# through stack/install.sh when missing); PINLEDGER_IMAGE_ENGINE=podman|docker chooses.
# The base: PINLEDGER_IMAGE_BASE names one (e.g. python:3.11-slim-bookworm, for a
# machine that reaches a public registry); unset, it is made from Debian's packages
# (mmdebstrap), since these machines reach no image registry: two images, a builder
# (python3, python3-venv) and a runtime (python3 alone), tagged with a hash of their
# recipe and cached in the engine's storage, made again only when the recipe changes.
#
# Podman on these machines runs containers only with runc (crun: "cgroups in hybrid
# mode not supported") and no default ulimits (setrlimit is refused): the
# containers.conf that says so is written to the cache and given by CONTAINERS_CONF.
#
# PINLEDGER_IMAGE_NEW_BASE=1 makes the Debian bases again though cached (to take in
# Debian's security updates).
#
# Progress goes to stderr; stdout gets what a caller needs to run the image, as
# KEY=VALUE lines: IMAGE, ENGINE and (podman) CONTAINERS_CONF.
# shellcheck source-path=SCRIPTDIR
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=../../stack/lib.sh
source "$ROOT/stack/lib.sh"
# shellcheck source=../../stack/install.sh
source "$ROOT/stack/install.sh"
say() { printf '[image] %s\n' "$*" >&2; }
die() { printf '[image] ERROR: %s\n' "$*" >&2; exit 1; }

PYTHON=${PYTHON:-python3}
IMAGE_CACHE=$CACHE/image
SUITE=bookworm
MIRRORS=(
    "deb http://deb.debian.org/debian $SUITE main"
    "deb http://deb.debian.org/debian $SUITE-updates main"
    "deb http://deb.debian.org/debian-security $SUITE-security main"
)
# The builder's Debian packages; the runtime's are these less BUILDER_ONLY. The
# `essential` variant leaves out apt and what only installing packages needs (55 MiB
# less than minbase); a merged /usr without the usrmerge package, which pulls in perl.
BASE_PACKAGES=(python3 python3-venv ca-certificates)
BUILDER_ONLY=(python3-venv python3.11-venv python3-pip-whl python3-setuptools-whl)
MMDEBSTRAP_OPTIONS=(
    --variant=essential
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr
    --dpkgopt='path-exclude=/usr/share/doc/*'
    --dpkgopt='path-include=/usr/share/doc/*/copyright'
    --dpkgopt='path-exclude=/usr/share/man/*'
    --dpkgopt='path-exclude=/usr/share/info/*'
    --dpkgopt='path-exclude=/usr/share/locale/*'
    --dpkgopt='path-include=/usr/share/locale/locale.alias'
    --dpkgopt='path-exclude=/usr/share/lintian/*'
    # glibc's iconv modules: nothing in the image converts through iconv.
    --dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/gconv/*'
)

version() {
    # The package's version, as pyproject.toml gives it to the wheel.
    "$PYTHON" -c 'import tomllib, sys
print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' "$ROOT/pyproject.toml"
}

recipe_hash() {
    # Whatever decides the base's content: a change makes a new tag, so a new base.
    printf '%s\n' "$SUITE" "${MIRRORS[@]}" "${BASE_PACKAGES[@]}" "${BUILDER_ONLY[@]}" \
        "${MMDEBSTRAP_OPTIONS[@]}" | sha256sum | cut -c1-12
}

choose_engine() {
    case ${PINLEDGER_IMAGE_ENGINE:-} in
        podman | docker) ENGINE=$PINLEDGER_IMAGE_ENGINE ;;
        '')
            if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
                ENGINE=docker
            else
                ENGINE=podman
            fi
            ;;
        *) die "PINLEDGER_IMAGE_ENGINE=$PINLEDGER_IMAGE_ENGINE: podman or docker" ;;
    esac
    if [[ $ENGINE == podman ]]; then
        install_missing podman runc
        installed podman || die "podman is not installed (bash stack/install.sh podman runc)"
        export CONTAINERS_CONF=$IMAGE_CACHE/containers.conf
        cat >"$CONTAINERS_CONF" <<'CONF'
# Written by deploy/image/build.sh: podman on these machines runs containers only with
# runc, and only without default ulimits (setrlimit is refused in the sandbox).
[containers]
default_ulimits = []

[engine]
runtime = "runc"
CONF
    fi
}

have_image() {  # NAME
    "$ENGINE" image inspect "$1" >/dev/null 2>&1
}

# Makes both bases from one mmdebstrap run: the builder's tree is imported, then the
# builder-only packages are purged from it and the runtime's is imported.
make_bases() {  # BUILDER_TAG RUNTIME_TAG
    install_missing mmdebstrap
    installed mmdebstrap || die "mmdebstrap is not installed (bash stack/install.sh mmdebstrap)"
    local work tree started=$SECONDS
    work=$(mktemp -d "$IMAGE_CACHE/base.XXXXXX")
    # shellcheck disable=SC2064  # the path is fixed now
    trap "as_root rm -rf '$work'" EXIT
    tree=$work/root
    say "making the base images from Debian's packages ($SUITE: ${BASE_PACKAGES[*]})"
    as_root mmdebstrap --quiet "${MMDEBSTRAP_OPTIONS[@]}" \
        --include="$(IFS=,; printf '%s' "${BASE_PACKAGES[*]}")" \
        "$SUITE" "$tree" "${MIRRORS[@]}" >&2
    import_tree "$tree" "$1" "$work/builder.tar"
    as_root chroot "$tree" dpkg --purge "${BUILDER_ONLY[@]}" >&2
    import_tree "$tree" "$2" "$work/runtime.tar"
    as_root rm -rf "$work"
    trap - EXIT
    say "base images made in $((SECONDS - started)) s"
}

import_tree() {  # TREE TAG TARFILE
    as_root tar --numeric-owner --xattrs --sort=name -C "$1" -cf "$3" .
    "$ENGINE" import "$3" "$2" >/dev/null
    as_root rm -f "$3"
}

# Keeps the newest bases only: each recipe change would leave ~100 MiB behind.
remove_old_bases() {  # KEEP_TAG...
    local image
    while read -r image; do
        [[ " $* " == *" $image "* ]] && continue
        "$ENGINE" rmi "$image" >/dev/null 2>&1 || true
    done < <("$ENGINE" images --format '{{.Repository}}:{{.Tag}}' | grep '/pinledger-base:' || true)
}

main() {
    local release base_args=() started=$SECONDS
    release=$(version)
    # One build at a time: two would make the same bases, and one's prune could take
    # the layers the other is building on.
    mkdir -p "$IMAGE_CACHE"
    exec 9>"$IMAGE_CACHE/build.lock"
    flock 9
    choose_engine
    if [[ -n ${PINLEDGER_IMAGE_BASE:-} ]]; then
        base_args=(--build-arg "BASE=$PINLEDGER_IMAGE_BASE")
    else
        local hash builder runtime
        hash=$(recipe_hash)
        builder=localhost/pinledger-base:builder-$hash
        runtime=localhost/pinledger-base:runtime-$hash
        if [[ ${PINLEDGER_IMAGE_NEW_BASE:-} == 1 ]] || ! have_image "$builder" ||
            ! have_image "$runtime"; then
            make_bases "$builder" "$runtime"
            remove_old_bases "$builder" "$runtime"
        fi
        base_args=(--build-arg "BUILDER_BASE=$builder" --build-arg "BASE=$runtime")
    fi
    # The builder fetches the Python dependencies from PyPI on the host's network,
    # trusting the CAs pip trusts here (an egress proxy may re-sign TLS).
    local ca=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
    if [[ -s $ca ]]; then base_args+=(--secret "id=pip-ca,src=$ca"); fi
    say "building pinledger:$release with $ENGINE"
    local build=("$ENGINE" build --network host "${base_args[@]}" --build-arg "VERSION=$release"
        -f "$ROOT/Containerfile")
    # The builder stage tagged too, so that pruning the images earlier builds left
    # (untagged now, dev.pinledger.stage labels them) keeps the layers this build reuses.
    "${build[@]}" --target builder -t localhost/pinledger-builder:latest "$ROOT" >&2
    "${build[@]}" -t "pinledger:$release" -t pinledger:latest "$ROOT" >&2
    "$ENGINE" image prune -f --filter label=dev.pinledger.stage >/dev/null
    say "built pinledger:$release in $((SECONDS - started)) s"
    printf 'IMAGE=pinledger:%s\nENGINE=%s\n' "$release" "$ENGINE"
    if [[ $ENGINE == podman ]]; then printf 'CONTAINERS_CONF=%s\n' "$CONTAINERS_CONF"; fi
}

main "$@"
