#!/usr/bin/env bash
# Installs the Debian -dev packages the C build needs when their headers are missing: PCRE2
# (libpcre2-dev, /usr/include/pcre2.h) for the BPE pre-tokenizer's Unicode regexes, and for
# `nibble serve` libmicrohttpd (libmicrohttpd-dev) and cJSON (libcjson-dev).
# Non-interactive, reads no stdin; as root it runs apt-get itself (CI), otherwise it says what to run.
set -euo pipefail
need=()
[ -f /usr/include/pcre2.h ] || need+=(libpcre2-dev)
[ -f /usr/include/microhttpd.h ] || need+=(libmicrohttpd-dev)
[ -f /usr/include/cjson/cJSON.h ] || need+=(libcjson-dev)
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing ${need[*]}; run as root: apt-get install -y --no-install-recommends ${need[*]}" >&2
    echo "install-deps: (or: sudo $0)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends "${need[@]}" </dev/null ||
    { apt-get update </dev/null && apt-get install -y --no-install-recommends "${need[@]}" </dev/null; }
