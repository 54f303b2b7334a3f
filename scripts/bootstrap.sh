#!/usr/bin/env bash
# Installs, on a fresh Debian machine (as root), what exists before the virtualenv:
#   scripts/bootstrap.sh          Python with venv and pip (for `make demo`)
#   scripts/bootstrap.sh --test   also the real tools the test suite drives: fio,
#                                 sshd (namespace hosts), iproute2, PostgreSQL, sysbench,
#                                 stress-ng, e2fsprogs/util-linux (loop file systems), Chromium
#                                 (the report in a real browser)
# Everything else comes from pip (pyproject.toml) or the project's Ansible roles.
set -euo pipefail

need=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "$1" ]; }
have python3 || need+=(python3)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv python3-pip)

if [ "${1:-}" = "--test" ]; then
    have pgrep || need+=(procps)
    have fio || need+=(fio)
    have /usr/sbin/sshd || need+=(openssh-server)
    have ssh-keygen || need+=(openssh-client)
    have ip || need+=(iproute2)
    have losetup || need+=(util-linux)
    have mkfs.ext4 || need+=(e2fsprogs)
    have filefrag || need+=(e2fsprogs)
    have sysbench || need+=(sysbench)
    have stress-ng || need+=(stress-ng)
    ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need+=(postgresql)
    have chromium || need+=(chromium)
fi

if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "bootstrap: please install: ${need[*]} (needs root and apt-get)" >&2
        exit 1
    fi
    echo "bootstrap: installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
fi
