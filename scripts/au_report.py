#!/usr/bin/python3
"""Tables and a plot from scripts/au_bench.sh results (one JSON line per run).

    au_report.py results.jsonl [more.jsonl...] --table table.md --plot au.png

For each workload and setup: AU per accelerator count (the median over
rounds when there are several, with the range), the counts holding AU >=
90% (every count up to N, and the largest), and CPU seconds per GB read
of the daemon, MinIO, Toxiproxy and the loader processes.
"""

import argparse
import json
import statistics
from collections import defaultdict

PASS = 0.90
ORDER = ["local", "shardfs-warm", "shardfs-cold", "s3fs", "rclone"]
STYLE = {"local": ("black", "o", "--"), "shardfs-warm": ("tab:green", "s", "-"),
         "shardfs-cold": ("tab:blue", "D", "-"), "s3fs": ("tab:red", "v", "-"), "rclone": ("tab:orange", "^", "-")}


def load(paths):
    runs = defaultdict(lambda: defaultdict(list))  # (workload, system) -> n -> [run]
    for path in paths:
        for line in open(path):
            r = json.loads(line)
            if "workload" in r:
                runs[(r["workload"], r["system"])][r["accelerators"]].append(r)
    return runs


def au_of(rs):
    aus = [r["au"] for r in rs if "au" in r]
    return statistics.median(aus) if aus else None, aus


def passing(by_n):
    """(every count up to which passes, the largest count that passes): on a
    shared box one noisy run can fail a small count, so both are shown."""
    ok = [n for n in sorted(by_n) if (au_of(by_n[n])[0] or 0) >= PASS]
    upto = 0
    for n in sorted(by_n):
        if n not in ok:
            break
        upto = n
    return upto, max(ok, default=0)


def cpu_per_gb(rs, key):
    gb = sum(r.get("bytes", 0) for r in rs) / 1e9
    return sum(r.get(key, 0) for r in rs) / gb if gb else 0


def table(runs, workloads):
    out = []
    for wl in workloads:
        systems = [s for s in ORDER if (wl, s) in runs]
        counts = sorted({n for s in systems for n in runs[(wl, s)]})
        out.append("**%s**\n" % wl)
        out.append("| setup | " + " | ".join("%d acc." % n for n in counts) +
                   " | AU ≥ 90% at every count up to | largest count at AU ≥ 90% |")
        out.append("|---" * (len(counts) + 3) + "|")
        for s in systems:
            cells = []
            for n in counts:
                au, aus = au_of(runs[(wl, s)].get(n, []))
                if au is None:
                    cells.append("error" if runs[(wl, s)].get(n) else "")
                elif len(aus) > 1:
                    cells.append("%.0f%% (%.0f-%.0f)" % (100 * au, 100 * min(aus), 100 * max(aus)))
                else:
                    cells.append("%.1f%%" % (100 * au))
            out.append("| %s | %s | **%d** | **%d** |" % ((s, " | ".join(cells)) + passing(runs[(wl, s)])))
        out.append("")
        out.append("CPU seconds per GB read (all counts together):\n")
        out.append("| setup | daemon | MinIO | Toxiproxy | loader processes |")
        out.append("|---|---|---|---|---|")
        for s in systems:
            rs = [r for n in runs[(wl, s)] for r in runs[(wl, s)][n]]
            out.append("| %s | %.2f | %.2f | %.2f | %.2f |" % (
                s, cpu_per_gb(rs, "daemon_cpu_s"), cpu_per_gb(rs, "minio_cpu_s"),
                cpu_per_gb(rs, "toxiproxy_cpu_s"), cpu_per_gb(rs, "loader_cpu_s")))
        out.append("")
    return "\n".join(out)


def plot(runs, workloads, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(workloads), figsize=(6 * len(workloads), 4.5), squeeze=False)
    for ax, wl in zip(axes[0], workloads):
        for s in ORDER:
            by_n = runs.get((wl, s))
            if not by_n:
                continue
            ns = sorted(n for n in by_n if au_of(by_n[n])[0] is not None)
            color, marker, line = STYLE[s]
            ax.plot(ns, [100 * au_of(by_n[n])[0] for n in ns], line, color=color, marker=marker, label=s)
        ax.axhline(100 * PASS, color="gray", linestyle=":", linewidth=1, label="90%: passing")
        ax.set_xticks(sorted({n for s in ORDER for n in runs.get((wl, s), {})}))
        ax.set_title(wl)
        ax.set_xlabel("emulated accelerators")
        ax.set_ylabel("accelerator utilization (%)")
        ax.set_ylim(0, 105)
        ax.grid(alpha=0.3)
        ax.legend(loc="lower left", fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", nargs="+", help="results.jsonl of one or more runs (rounds)")
    p.add_argument("--table", required=True)
    p.add_argument("--plot", required=True)
    p.add_argument("--title", default="AU through MinIO behind Toxiproxy (20 ms, 50 MB/s per connection), 2-core box")
    args = p.parse_args()
    runs = load(args.results)
    workloads = [w for w in ("resnet50", "unet3d") if any(k[0] == w for k in runs)]
    text = table(runs, workloads)
    with open(args.table, "w") as f:
        f.write(text)
    print(text)
    plot(runs, workloads, args.plot, args.title)


if __name__ == "__main__":
    main()
