#!/usr/bin/env bash
# Builds llama.cpp's llama-server and llama-bench from the source tree the pinned llama-cpp-python's
# sdist carries (scripts/fetch-llama-src.sh) into build/llama-tools/bin/ (ignored), the peers of
# bench/serve_load.py and of bench/vs_llama.py --llama-bench. CPU only, no web UI, no TLS, nothing
# fetched at build time; GGML_NATIVE=ON by default so the peer gets the best kernels this CPU has
# (LLAMA_NATIVE=OFF: the portable AVX2 build of the parity tests). LLAMA_TOOLS_OUT names another
# build folder and LLAMA_CMAKE_ARGS adds options, e.g. a build without AMX where its AMX kernels
# crash: LLAMA_TOOLS_OUT=build/llama-tools-noamx LLAMA_NATIVE=OFF LLAMA_CMAKE_ARGS="-DGGML_AVX512=ON
# -DGGML_AVX512_VNNI=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_BF16=ON -DGGML_AMX_INT8=OFF". Idempotent;
# prints llama-server's path.
#   usage: scripts/build-llama-tools.sh [JOBS]      JOBS defaults to nproc
set -euo pipefail
cd "$(dirname "$0")/.."
tree=$(bash scripts/fetch-llama-src.sh)
out=${LLAMA_TOOLS_OUT:-build/llama-tools}
jobs=${1:-$(nproc)}
native=${LLAMA_NATIVE:-ON}
if [ ! -x "$out/bin/llama-server" ] || [ ! -x "$out/bin/llama-bench" ]; then
    cmake -S "$tree" -B "$out" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE="$native" -DGGML_CUDA=OFF \
        -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
        -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_APP=OFF \
        -DBUILD_SHARED_LIBS=OFF ${LLAMA_CMAKE_ARGS:-} >/dev/null
    cmake --build "$out" --target llama-server llama-bench -j "$jobs" >/dev/null
fi
echo "$out/bin/llama-server"
