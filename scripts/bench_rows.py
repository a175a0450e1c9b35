"""The table of a benchmark's ROW lines: one row per name, each column the
median over the rounds and the range.

    bench_rows.py RESULTS COLUMN... where COLUMN is TITLE=KEY:UNIT and UNIT is
    one of value (the field as it is), per_gb (the field per GB of the row's
    bytes), mib (a field in KiB, shown in MiB) or share (the field over the
    row's bytes, 0 where a row lacks it).

A RATIO line (--ratio A/B) adds the per-round ratio of the first column of
rows A and B, in the order they ran.
"""
import sys


def median(vs):
    vs = sorted(vs)
    n = len(vs)
    return vs[n // 2] if n % 2 else (vs[n // 2 - 1] + vs[n // 2]) / 2


def main(argv):
    path, *specs = argv
    ratio = None
    if "--ratio" in specs:
        i = specs.index("--ratio")
        ratio = specs[i + 1].split("/")
        del specs[i:i + 2]
    rows = []
    for line in open(path):
        kind, *fields = line.split() or [""]
        if kind == "ROW":
            rows.append(dict(f.split("=", 1) for f in fields))
    units = {
        "value": lambda r, k: float(r[k]),
        "per_gb": lambda r, k: float(r[k]) / (float(r["bytes"]) / 1e9),
        "mib": lambda r, k: float(r[k]) / 1024,
        "share": lambda r, k: float(r.get(k, 0)) / float(r["bytes"]),
    }
    cols = []
    for spec in specs:
        title, rest = spec.split("=", 1)
        key, unit = rest.split(":")
        cols.append((title, key, units[unit]))
    names = list(dict.fromkeys(r["name"] for r in rows))
    print("| row | " + " | ".join(c[0] for c in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for n in names:
        cells = []
        for _, key, f in cols:
            vs = [f(r, key) for r in rows if r["name"] == n]
            cells.append(f"{median(vs):,.3f} ({min(vs):,.3f}-{max(vs):,.3f})")
        print(f"| {n} | " + " | ".join(cells) + " |")
    if ratio:
        _, key, f = cols[0]
        a = [f(r, key) for r in rows if r["name"] == ratio[0]]
        b = [f(r, key) for r in rows if r["name"] == ratio[1]]
        rs = [x / y for x, y in zip(a, b)]
        if rs:
            print(f"\n{ratio[0]} / {ratio[1]}, per round: {', '.join(f'{r:.3f}' for r in rs)} (median {median(rs):.3f})")


if __name__ == "__main__":
    main(sys.argv[1:])
