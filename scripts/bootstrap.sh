#!/usr/bin/env bash
# Installs what `make` needs before the virtualenv exists, on a fresh Debian machine
# (as root): Python with venv and pip, and the tools the test suite uses.
# Everything else comes from pip (pyproject.toml) or the project's Ansible roles.
set -euo pipefail

need=()
command -v python3 >/dev/null 2>&1 || need+=(python3)
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv python3-pip)
command -v pgrep >/dev/null 2>&1 || need+=(procps)

if [ ${#need[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "bootstrap: please install: ${need[*]} (needs root and apt-get)" >&2
        exit 1
    fi
    echo "bootstrap: installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
