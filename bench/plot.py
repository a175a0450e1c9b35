#!/usr/bin/python3
"""Draws the plots of `shardfs bench report`: reads a JSON list of plots
(file, title, xlabel, ylabel, series of x, median, min, max per system) on
stdin and writes each as a PNG into the directory given. It computes
nothing: every figure comes from the report.

    shardfs bench report RESULTS.jsonl --plots DIR    (runs this)
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def draw(plot, out_dir):
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for s in plot["series"]:
        lower = [m - lo for m, lo in zip(s["median"], s["min"])]
        upper = [hi - m for m, hi in zip(s["median"], s["max"])]
        ax.errorbar(s["x"], s["median"], yerr=[lower, upper], marker="o", capsize=3, label=s["system"])
    ax.set_title(plot["title"])
    ax.set_xlabel(plot["xlabel"])
    ax.set_ylabel(plot["ylabel"] + " (median, range over rounds)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(f"{out_dir}/{plot['file']}", dpi=100)
    plt.close(fig)


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: plot.py OUT_DIR < plots.json")
    for plot in json.load(sys.stdin):
        draw(plot, sys.argv[1])


if __name__ == "__main__":
    main()
