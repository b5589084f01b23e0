"""Two builds' kernels side by side: bench_batch of OLD and NEW in alternating rounds.

On a noisy host one run of each binary says little (the same GEMV read 12 to 21 GB/s within
minutes on a shared Zen 4); alternating many short rounds spreads the drift over both sides. Every
round runs `OLD ARGS` then `NEW ARGS` (bench_batch's own flags, passed through unchanged) and
reads the numbers of its markdown table. Prints, per type, shape and column, the median
(min..max) of the rounds for each binary and the NEW/OLD ratio of the medians. Numbers only:
nothing here passes or fails. The environment goes to both (e.g. NIBBLE_ISA=avx2).
Usage:
  python3 bench/ab_kernels.py OLD_BENCH_BATCH NEW_BENCH_BATCH ROUNDS BENCH_BATCH_ARGS...
e.g.
  NIBBLE_ISA=avx2 python3 bench/ab_kernels.py /tmp/old/build/bench/bench_batch build/bench/bench_batch 20 \\
      -t 1 -n 1 -r 3 --types mxfp4 --shapes 262144x640,6912x1152
"""
import statistics
import subprocess
import sys


def table(cmd):
    """{(type, shape, threads, column): value} from one bench_batch run's tables (one per thread
    count, each under its "N thread(s)" line)."""
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    cols, vals, threads = [], {}, '?'
    for line in out.splitlines():
        words = line.split()
        if len(words) == 2 and words[0].isdigit() and words[1] in ('thread', 'threads'):
            threads = words[0]
            continue
        cells = [c.strip() for c in line.strip().strip('|').split('|')]
        if cells[:3] == ['type', 'shape', 'kernel']:
            cols = cells[3:]
        elif cols and len(cells) == 3 + len(cols) and not cells[0].startswith('-'):
            for col, cell in zip(cols, cells[3:]):
                vals[(cells[0], cells[1], threads, col)] = float(cell.split()[0])
    if not vals:
        sys.exit(f'ab_kernels: no table in the output of {" ".join(cmd)}')
    return vals


def main():
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    old, new, rounds, args = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
    runs = {'old': [], 'new': []}
    for r in range(rounds):
        for side, binary in (('old', old), ('new', new)):
            runs[side].append(table([binary] + args))
        print(f'round {r + 1}/{rounds}', file=sys.stderr)
    print(f'{rounds} alternating rounds of: {" ".join(args)}')
    print('| type | shape | threads | column | old | new | new/old |')
    print('|---|---|---|---|---|---|---|')
    for key in runs['old'][0]:
        o = [t[key] for t in runs['old'] if key in t]
        n = [t[key] for t in runs['new'] if key in t]
        mo, mn = statistics.median(o), statistics.median(n)
        print(f'| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {mo:.1f} ({min(o):.1f}..{max(o):.1f}) | '
              f'{mn:.1f} ({min(n):.1f}..{max(n):.1f}) | {mn / mo:.2f} |')


if __name__ == '__main__':
    main()
