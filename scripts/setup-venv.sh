#!/usr/bin/env bash
# Creates the Python virtual environment the parity tests use (oracles from PyPI) and installs
# the pinned requirements into it. Idempotent; called by make.
set -euo pipefail
venv=$1
req=$2
if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check --upgrade pip
# llama-cpp-python builds llama.cpp from source; a portable AVX2 build, CPU only.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_CUDA=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$req" </dev/null
