#!/usr/bin/env bash
# Test scaffolding for scripts/check_images.sh on a machine that has Debian's packages but no
# image registry: starts a Docker daemon if none answers, and makes a local stand-in for
# `python:3.11-slim` (Debian bookworm by debootstrap: python3, python3-pip, python3-venv and
# ca-certificates, tagged python:3.11-slim), so the Dockerfiles under deploy/ build unchanged.
# Bookworm's python3 is 3.11.2; the official image carries the newest 3.11 release, so a bug
# fixed in a later 3.11 may show here and not there.
#   bash scripts/docker_base.sh            # daemon + stand-in base (skips what already exists)
#   bash scripts/docker_base.sh --daemon   # only the daemon
# Exit 0: the daemon answers (and the base exists); 3: no daemon could be started here.
set -euo pipefail

base_tag="python:3.11-slim"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
log_dir="${DOCKER_LOG_DIR:-/tmp}"

daemon_answers() { docker info >/dev/null 2>&1; }

start_daemon() {
    daemon_answers && return 0
    if ! command -v dockerd >/dev/null; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
            (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io) \
                >"$log_dir/docker-apt.log" 2>&1 || true
        fi
        command -v dockerd >/dev/null || { echo "no dockerd: apt-get install docker.io failed" >&2; return 3; }
    fi
    # No bridge and no iptables rules: every build and container here uses --network host.
    # setsid: the daemon outlives this script (the caller stops it by the pid file).
    setsid dockerd --bridge=none --iptables=false >"$log_dir/dockerd.log" 2>&1 < /dev/null &
    echo $! >"$log_dir/dockerd.pid"
    for _ in $(seq 60); do
        daemon_answers && return 0
        kill -0 "$(cat "$log_dir/dockerd.pid")" 2>/dev/null || break
        sleep 1
    done
    echo "dockerd did not start (last lines of $log_dir/dockerd.log):" >&2
    tail -n 5 "$log_dir/dockerd.log" >&2 || true
    kill "$(cat "$log_dir/dockerd.pid")" 2>/dev/null || true
    rm -f "$log_dir/dockerd.pid"  # nothing of ours runs for a caller to stop
    return 3
}

make_base() {
    if docker image inspect "$base_tag" >/dev/null 2>&1; then
        return 0
    fi
    command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap \
        >"$log_dir/debootstrap-apt.log" 2>&1
    local root
    root="$(mktemp -d "${TMPDIR:-/tmp}/rl-base-root.XXXXXX")"
    trap 'rm -rf "$root"' RETURN
    echo "debootstrap bookworm into $root (a few minutes; log $log_dir/debootstrap.log)" >&2
    debootstrap --variant=minbase --include=python3,python3-pip,python3-venv,ca-certificates \
        bookworm "$root" "$mirror" >"$log_dir/debootstrap.log" 2>&1
    # `python` and `pip` on PATH, in /usr/local/bin as the official image has them.
    ln -sf /usr/bin/python3 "$root/usr/local/bin/python"
    ln -sf /usr/bin/pip3 "$root/usr/local/bin/pip"
    # This machine reaches PyPI through its own certificate authorities: the image trusts the
    # host's bundle, and pip (and anything using OpenSSL's default file) is pointed at it.
    local bundle="${HOST_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}"
    cp "$bundle" "$root/etc/ssl/certs/host-ca-bundle.crt"
    rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
    # The official image's pip installs into /usr/local without complaint; Debian's python
    # marks itself externally managed, which PIP_BREAK_SYSTEM_PACKAGES turns off.
    tar -C "$root" -c . | docker import \
        --change 'ENV LANG=C.UTF-8' \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV PIP_BREAK_SYSTEM_PACKAGES=1' \
        --change 'ENV PIP_CERT=/etc/ssl/certs/host-ca-bundle.crt' \
        --change 'ENV SSL_CERT_FILE=/etc/ssl/certs/host-ca-bundle.crt' \
        --change 'ENV REQUESTS_CA_BUNDLE=/etc/ssl/certs/host-ca-bundle.crt' \
        --change 'CMD ["python3"]' \
        - "$base_tag" >/dev/null
    echo "made $base_tag: $(docker run --rm --network host "$base_tag" python --version)" >&2
}

start_daemon || exit 3
[ "${1:-}" = "--daemon" ] || make_base
