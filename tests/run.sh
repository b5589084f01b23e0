#!/usr/bin/env bash
# Runs every C test program in BUILD/tests, then (when a Python is given) every parity script in
# tests/parity and the server's client tests in tests/serve, and adds up their "N passed, N failed" lines. A program that dies or prints no
# summary counts as one failure. The last line printed is the total.
set -u
build=$1
py=${2:-}
total_pass=0 total_fail=0 total_skip=0

tally() { # name, exit status, output file
    local name=$1 rc=$2 out=$3 line p f s
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$out" | tail -n 1)
    if [ -z "$line" ]; then
        echo "FAILED: $name exited $rc without a summary"
        tail -n 20 "$out"
        total_fail=$((total_fail + 1))
        return
    fi
    p=$(sed -E 's/^([0-9]+) passed.*/\1/' <<<"$line")
    f=$(sed -E 's/^[0-9]+ passed, ([0-9]+) failed.*/\1/' <<<"$line")
    s=$(sed -nE 's/.*, ([0-9]+) skipped.*/\1/p' <<<"$line")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "FAILED: $name exited $rc"; fi
    total_pass=$((total_pass + p)) total_fail=$((total_fail + f)) total_skip=$((total_skip + ${s:-0}))
    printf '%-28s %s\n' "$name" "$line"
    grep -E '^(FAIL|skipped)' "$out" | head -n 40
}

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for t in "$build"/tests/test_*; do
    [ -x "$t" ] || continue
    case "$t" in *.d) continue ;; esac
    "$t" >"$tmp" 2>&1
    tally "$(basename "$t")" $? "$tmp"
done
if [ -n "$py" ]; then
    for s in tests/parity/test_*.py tests/serve/test_*.py; do
        [ -f "$s" ] || continue
        NB_BUILD=$build "$py" "$s" >"$tmp" 2>&1
        tally "$(basename "$(dirname "$s")")/$(basename "$s")" $? "$tmp"
    done
fi
if [ "$total_skip" -gt 0 ]; then
    echo "$total_pass passed, $total_fail failed, $total_skip skipped"
else
    echo "$total_pass passed, $total_fail failed"
fi
[ "$total_fail" -eq 0 ]
