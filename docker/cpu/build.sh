#!/usr/bin/env bash
# Build the offline CPU image labkit/tritonserver:23.12-cpu with no image registry.
#
#   sudo docker/cpu/build.sh            # reuses the image when nothing changed
#   sudo docker/cpu/build.sh --force    # rebuild (debootstrap again, from its package cache)
#
# The recipe itself lives in labkit/docker/cpu_image.py (one source of truth for this script, the
# `labkit image build` command and the test fixture); docker/README.md describes it.
# Needs: root (debootstrap), a Docker engine (.ci/docker-engine.sh starts one), Debian's mirror.
set -euo pipefail
cd "$(dirname "$0")/../.."
PYTHON=${PYTHON:-.venv/bin/python}
exec "$PYTHON" -m labkit.cli image build "$@"
