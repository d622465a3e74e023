#!/usr/bin/env python3
"""How much goal G1 (never more delayed than Karpenter alone) moves by chance: one workload,
request seed and lead time of scripts/goals.py, re-run with other node launch draws
(`prewarm simulate --launch-seed`; the requests stay the same), reactive and prewarm only.

Prints, per launch seed, Karpenter alone's delayed share and prewarm's at the point chosen on
the training days, then the paired difference (prewarm - Karpenter alone, points) over the
launch seeds: mean, standard deviation, a 95 % t-interval of the mean, and how many single runs
miss G1's 0.01-point tolerance. The same for every quantile x release point of the sweep.
Raw JSON goes to OUT/<workload>-seed<s>-lead<l>-launch<k>.json and is reused if present.

Example (docs/notebook/2026-11-30-decision-model-measurements.md): python3 scripts/g1_noise.py --bin /tmp/prewarm-release
--traces /work/shared/traces --workload servegen --seed 2 --lead 90 --launch-seeds 2,11-20
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

import goals

# Two-sided 95 % Student t quantiles by degrees of freedom (1..30); 1.96 beyond.
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
       2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
       2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


def seeds(text):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def summary(label, diffs):
    n = len(diffs)
    mean = statistics.mean(diffs)
    sd = statistics.stdev(diffs) if n > 1 else 0.0
    half = (T95[n - 2] if n - 1 <= len(T95) else 1.96) * sd / n ** 0.5 if n > 1 else 0.0
    misses = sum(d > 100 * goals.G1_TOL for d in diffs)
    return (f"{label:<16} mean {mean:+.3f} pt [{mean - half:+.3f}, {mean + half:+.3f}], "
            f"sd {sd:.3f}, range {min(diffs):+.3f}..{max(diffs):+.3f}, "
            f"single runs missing G1: {misses}/{n}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--traces", required=True)
    ap.add_argument("--out", default="out/g1-noise")
    ap.add_argument("--workload", default="servegen")
    ap.add_argument("--seed", type=int, default=2)
    ap.add_argument("--lead", type=int, default=90)
    ap.add_argument("--launch-seeds", default="2,11-20", help="e.g. 2,11-20")
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--train-days", type=int, default=3)
    ap.add_argument("--servegen-rate-scale", type=float, default=0.05)
    args = ap.parse_args()
    args.seeds = args.servegen_seeds = [args.seed]
    flags = {name: f for name, f, _ in goals.workloads(args.traces, args)}[args.workload]
    os.makedirs(args.out, exist_ok=True)
    points, chosen = {}, []
    for k in seeds(args.launch_seeds):
        path = os.path.join(args.out, f"{args.workload}-seed{args.seed}-lead{args.lead}-launch{k}.json")
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            cmd = [args.bin, "simulate", *flags, "--seed", str(args.seed), "--launch-seed", str(k),
                   "--lead-times", str(args.lead), "--policies", "reactive,prewarm", "--threads", "1",
                   "--json"]
            print("# " + " ".join(cmd[1:]), file=sys.stderr)
            with open(path, "w") as f:
                subprocess.run(cmd, stdout=f, check=True)
        with open(path) as f:
            c = json.load(f)[0]
        r = goals.rows(c)
        alone = 100 * r["reactive"]["delayed_fraction"]
        pre = 100 * r["prewarm"]["delayed_fraction"]
        chosen.append(pre - alone)
        print(f"launch seed {k:>3}: Karpenter alone {alone:.3f} %, prewarm {pre:.3f} % "
              f"({r['prewarm']['detail']})")
        for p in c["frontiers"]["prewarm"]:
            key = f"q {p['knob']} {p['release']}"
            points.setdefault(key, []).append(100 * p["delayed_fraction"] - alone)
    print(f"\nprewarm - Karpenter alone, delayed share, {args.workload} seed {args.seed}, "
          f"lead {args.lead} s, {len(chosen)} launch seeds:")
    print(summary("chosen point", chosen))
    for key, diffs in points.items():
        print(summary(key, diffs))


if __name__ == "__main__":
    main()
