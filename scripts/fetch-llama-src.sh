#!/usr/bin/env bash
# Unpacks llama.cpp's source tree, as the pinned llama-cpp-python's source distribution carries it
# (vendor/llama.cpp: its vocabularies with their test vectors, its tools for the benchmarks), into
# build/llama-src/ (ignored). Idempotent; prints the tree's path. Called by make and the benches.
#   usage: scripts/fetch-llama-src.sh [PIP]      PIP defaults to build/venv/bin/pip
set -euo pipefail
cd "$(dirname "$0")/.."
pip=${1:-build/venv/bin/pip}
version=$(sed -n 's/^llama-cpp-python==//p' tests/parity/requirements.txt)
dir=build/llama-src
tree=$dir/llama_cpp_python-$version/vendor/llama.cpp
if [ ! -f "$tree/.unpacked" ]; then
    mkdir -p "$dir"
    sdist=$dir/llama_cpp_python-$version.tar.gz
    [ -f "$sdist" ] || "$pip" download --quiet --disable-pip-version-check --no-binary :all: --no-deps \
        "llama-cpp-python==$version" -d "$dir" </dev/null
    tar -xzf "$sdist" -C "$dir"
    touch "$tree/.unpacked"
fi
echo "$tree"
