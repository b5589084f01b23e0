#!/usr/bin/env bash
# Fetches the evaluation text for `nibble perplexity` and `make grid`: The Jargon File 4.4.7
# (Eric S. Raymond et al., public domain), plain text as Debian's package jargon-text ships it
# (/usr/share/doc/jargon-text/jargon.txt.gz, 1.68 MB, 424,327 Gemma 3 tokens). Writes
# models/jargon-4.4.7.txt (ignored by git) and prints its path; a second run reuses the file.
# No root needed: `apt-get download` fetches the .deb into a temporary folder and dpkg-deb unpacks
# it there (an installed copy of the package is used directly). As root, an empty package list is
# refreshed once with apt-get update.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=models/jargon-4.4.7.txt
sha=40dfb4b98191a670a09a183d5798d50f243d23fdbd1495dcc0aca2ce5895ba97
ok() { [ -f "$1" ] && [ "$(sha256sum "$1" | cut -d' ' -f1)" = "$sha" ]; }
if ok "$dest"; then
    echo "$dest"
    exit 0
fi
mkdir -p models
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gz=/usr/share/doc/jargon-text/jargon.txt.gz
if [ ! -f "$gz" ]; then
    if ! apt-cache show jargon-text >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        apt-get update -qq >&2
    fi
    (cd "$tmp" && apt-get download jargon-text >&2 2>"$tmp/apt.log") || {
        cat "$tmp/apt.log" >&2
        echo "fetch-text.sh: apt-get download jargon-text failed (as root, run apt-get update first)" >&2
        exit 1
    }
    dpkg-deb -x "$tmp"/jargon-text_*.deb "$tmp/root"
    gz=$tmp/root/usr/share/doc/jargon-text/jargon.txt.gz
fi
gunzip -c "$gz" >"$tmp/jargon.txt"
if ! ok "$tmp/jargon.txt"; then
    echo "fetch-text.sh: jargon.txt does not have the expected sha256 $sha" >&2
    exit 1
fi
mv "$tmp/jargon.txt" "$dest"
echo "$dest"
