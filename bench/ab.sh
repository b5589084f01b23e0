#!/usr/bin/env bash
# Before/after: prefill and decode tokens/s of two nibble binaries on the same model, in
# alternating rounds (the machine drifts between rounds; alternation spreads the drift over both).
#   bench/ab.sh OLD_NIBBLE NEW_NIBBLE [MODEL] [ROUNDS] [THREADS...]
# Each round is `nibble run -f PROMPT -n 128 --ignore-eos --temp 0 -c 1024` on a fixed 512-word
# prompt; prints per thread count the median (min..max) of each binary and the new/old ratio of
# the medians. Numbers only: nothing here passes or fails.
set -euo pipefail
old=$1 new=$2
model=${3:-models/gemma-3-270m-q4_k_m.gguf}
rounds=${4:-5}
shift $(($# < 4 ? $# : 4))
threads=${*:-1 2}
prompt=$(mktemp)
trap 'rm -f "$prompt"' EXIT
words=(the robot painted a wall with brushes and small careful strokes while the workshop slept)
for i in $(seq 0 511); do printf '%s ' "${words[$(((i * 7 + i / 13) % ${#words[@]}))]}"; done >"$prompt"
echo "model $model, $rounds rounds; $("$new" version | tail -n 1)"
echo "| threads | metric | old tok/s | new tok/s | new/old |"
echo "|---|---|---|---|---|"
for t in $threads; do
    rows=""
    for _ in $(seq "$rounds"); do
        for side in old new; do
            bin=$old
            [ "$side" = new ] && bin=$new
            stats=$("$bin" run -m "$model" -f "$prompt" -n 128 --ignore-eos --temp 0 -t "$t" -c 1024 2>&1 >/dev/null)
            pp=$(awk '/^prompt:/ {print $4}' <<<"$stats")
            tg=$(awk '/^generation:/ {print $4}' <<<"$stats")
            rows+="$side pp $pp"$'\n'"$side tg $tg"$'\n'
        done
    done
    for metric in pp tg; do
        awk -v t="$t" -v m="$metric" '
            function median(a, n,   i, j, x) {
                for (i = 2; i <= n; i++) { x = a[i]; for (j = i - 1; j > 0 && a[j] > x; j--) a[j + 1] = a[j]; a[j + 1] = x }
                return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
            }
            $2 == m && $1 == "old" { o[++no] = $3 }
            $2 == m && $1 == "new" { w[++nw] = $3 }
            END {
                mo = median(o, no); mw = median(w, nw)
                printf "| %s | %s | %.1f (%.1f..%.1f) | %.1f (%.1f..%.1f) | %.3f |\n", t, m == "pp" ? "prefill" : "decode",
                       mo, o[1], o[no], mw, w[1], w[nw], mw / mo
            }' <<<"$rows"
    done
done
