#!/usr/bin/env python3
"""Medians of the FP8 lab's round logs (gemm_fp8_lab's table lines), per shape and impl, as markdown.

    python3 tools/lab_medians.py cublaslt,fp8v6,fp8engine round1.log round2.log ...

A table line ends in: impl, ms, TFLOP/s, ratio, err, check; failed rows and unparsable lines are
skipped; '-' where an impl has no timed row for a shape.
"""
import collections
import re
import statistics
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    impls = sys.argv[1].split(',')
    times = collections.defaultdict(list)
    shapes = []
    for path in sys.argv[2:]:
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) < 8 or 'FAIL' in line or not re.match(r'^[0-9.]+$', p[-5]):
                    continue
                if p[0] not in shapes:
                    shapes.append(p[0])
                times[(p[0], p[-6])].append(float(p[-5]))
    print('| shape | ' + ' | '.join(impls) + ' |')
    print('|---' * (len(impls) + 1) + '|')
    for s in shapes:
        cells = ['%.4f' % statistics.median(times[(s, i)]) if (s, i) in times else '-' for i in impls]
        print('| ' + s + ' | ' + ' | '.join(cells) + ' |')


if __name__ == '__main__':
    main()
