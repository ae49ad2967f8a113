#!/usr/bin/env python3
"""Compare two crafter trace JSONL files record by record.

Usage: trace_diff.py REFERENCE.jsonl CANDIDATE.jsonl

Records are compared as parsed JSON values (so number formatting does not matter; floats
must be equal exactly). Prints the first differing record and field and exits 1, or prints a
one-line summary and exits 0.
"""
import json
import sys


def first_diff(a, b, path=''):
    """Return (path, a, b) of the first difference, or None."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a.keys()) + [k for k in b.keys() if k not in a]:
            if key not in a or key not in b:
                return (f'{path}.{key}', a.get(key, '<missing>'), b.get(key, '<missing>'))
            d = first_diff(a[key], b[key], f'{path}.{key}')
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return (f'{path} (length)', len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_diff(x, y, f'{path}[{i}]')
            if d:
                return d
        return None
    if isinstance(a, bool) or isinstance(b, bool):
        return None if a is b else (path, a, b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return None if float(a) == float(b) else (path, a, b)
    return None if a == b else (path, a, b)


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    with open(argv[1]) as fa, open(argv[2]) as fb:
        ref = [json.loads(line) for line in fa if line.strip()]
        got = [json.loads(line) for line in fb if line.strip()]
    for i, (a, b) in enumerate(zip(ref, got)):
        d = first_diff(a, b)
        if d:
            where = f"record {i + 1} ({a.get('type')} episode {a.get('episode')} t {a.get('t', 0)})"
            print(f'MISMATCH at {where}: field {d[0]}: reference={d[1]!r} ours={d[2]!r}')
            return 1
    if len(ref) != len(got):
        print(f'MISMATCH: reference has {len(ref)} records, ours {len(got)}')
        return 1
    frames = sum(1 for r in ref if 'frame_sha256' in r)
    print(f'OK: {len(ref)} records identical ({frames} frames) {argv[1]} == {argv[2]}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
