#!/usr/bin/env python3
"""Issue 10's goals, measured: runs `prewarm simulate --json` on every workload, lead time and
seed of the goals, and prints one table (goal, workload, lead time, number per seed, verdict).

`make goals` runs it (not part of `make test`: it takes many minutes). Raw JSON goes to
OUT/goals/<workload>-seed<k>.json; `--from-json` re-renders the table from it without running.

How each goal is scored (scored days only; knobs chosen on training days where the workload
lasts long enough for --train-days, else in hindsight, and the table says which):
- G1 never more delayed: prewarm's delayed share <= Karpenter alone's + 0.01 points.
- G2 recurring workloads: prewarm <= 0.1 % delayed, with spare GPU-hours above the oracle
  (gpu_hours - oracle's) at least 25 % below the best buffer (fixed or percentage, its point
  chosen on training days) that meets the SLO on the scored days; when no buffer does,
  prewarm's point lies on or below the buffers' frontier (the fewest GPU-hours of any buffer
  point with at most prewarm's delay).
- G3 recurring workloads: node cold starts >= 80 % below Karpenter alone's for <= 10 % more
  GPU-hours; and <= 1.15x the oracle's GPU-hours while meeting the SLO.
- G4 memoryless bursts: prewarm's GPU-hours within 5 % of the best buffer point (either
  buffer's frontier) with at most prewarm's delay.
- G5 multi-day workloads: achieved band coverage within 5 points of its nominal quantile (the
  verdict is on the point estimate; the interval shown is the simulator's moving-block
  bootstrap over the scored decisions, blocks of one hour).
"""

import argparse
import json
import os
import subprocess
import sys
import time

SLO = 0.001
G1_TOL = 0.0001

RECURRING = ["servegen", "diurnal", "cron-bursts"]
MEMORYLESS = ["bursty", "burst-180"]


def workloads(traces, args):
    sg = ["--trace", os.path.join(traces, "servegen-m-large"), "--trace-dir", traces,
          "--rate-scale", str(args.servegen_rate_scale), "--train-days", "7"]
    days = ["--days", str(args.days), "--train-days", str(args.train_days)]
    hour = ["--burn-in", "900"]
    return [
        ("servegen", sg, args.servegen_seeds),
        ("diurnal", ["--scenario", "diurnal"] + days, args.seeds),
        ("cron-bursts", ["--scenario", "cron-bursts"] + days, args.seeds),
        ("bursty", ["--scenario", "bursty"] + hour, args.seeds),
        ("burst-180", ["--scenario", "burst-180"] + hour, args.seeds),
    ]


def run(binary, name, flags, seed, leads, out):
    path = os.path.join(out, f"{name}-seed{seed}.json")
    cmd = [binary, "simulate", *flags, "--seed", str(seed),
           "--lead-times", ",".join(str(l) for l in leads),
           "--policies", "reactive,buffer,buffer-pct,prewarm,oracle,ideal", "--json"]
    started = time.time()
    with open(path, "w") as f:
        subprocess.run(cmd, stdout=f, check=True)
    print(f"# {' '.join(cmd[1:])}  ({time.time() - started:.0f} s)", file=sys.stderr)
    return path


def rows(comparison):
    return {r["policy"]: r for r in comparison["rows"]}


def envelope(points, delayed):
    """Fewest GPU-hours among frontier points delaying at most `delayed` (None: none does)."""
    ok = [p["gpu_hours"] for p in points if p["delayed_fraction"] <= delayed + 1e-12]
    return min(ok) if ok else None


def buffer_points(c):
    return c["frontiers"].get("buffer", []) + c["frontiers"].get("buffer-pct", [])


def pct(x):
    return f"{100 * x:.3f} %"


def score(name, c):
    """Per goal: (number as text, passed or None when it does not apply)."""
    r = rows(c)
    p, re_, o = r["prewarm"], r["reactive"], r["oracle"]
    out = {}
    d = p["delayed_fraction"] - re_["delayed_fraction"]
    out["G1 never more delayed than Karpenter alone (+0.01 pt)"] = (
        f"{pct(p['delayed_fraction'])} vs {pct(re_['delayed_fraction'])}", d <= G1_TOL)
    if name in RECURRING:
        spare = p["gpu_hours"] - o["gpu_hours"]
        meeting = [r[b] for b in ("buffer", "buffer-pct") if r[b]["delayed_fraction"] <= SLO]
        if re_["delayed_fraction"] <= SLO and p["delayed_fraction"] <= SLO:
            # Karpenter alone meets the SLO: there is no spare to save, only to waste.
            best = min(meeting, key=lambda b: b["gpu_hours"])
            ok = None if p["gpu_hours"] <= best["gpu_hours"] * 1.005 else False
            text = (f"n/a: Karpenter alone meets the SLO ({pct(re_['delayed_fraction'])}); "
                    f"prewarm {p['gpu_hours']:.0f} vs best buffer {best['gpu_hours']:.0f} GPU-h")
        elif meeting:
            best = min(meeting, key=lambda b: b["gpu_hours"])
            bspare = best["gpu_hours"] - o["gpu_hours"]
            cut = 1 - spare / bspare if bspare > 0 else float("nan")
            ok = p["delayed_fraction"] <= SLO and bspare > 0 and cut >= 0.25
            text = (f"{pct(p['delayed_fraction'])} delayed; spare {spare:.0f} vs "
                    f"{best['policy']} {bspare:.0f} GPU-h ({100 * cut:+.0f} % fewer)")
        else:
            env = envelope(buffer_points(c), p["delayed_fraction"])
            ok = env is None or p["gpu_hours"] <= env
            text = (f"no buffer meets the SLO (oracle {pct(o['delayed_fraction'])}); prewarm "
                    f"{p['gpu_hours']:.0f} GPU-h at {pct(p['delayed_fraction'])}, buffers' "
                    f"frontier {'has no point that low' if env is None else f'{env:.0f}'}")
        out["G2 <=0.1 % delayed, >=25 % less spare than the best buffer"] = (text, ok)
        cold = 1 - p["cold_starts"] / re_["cold_starts"] if re_["cold_starts"] else float("nan")
        more = p["gpu_hours"] / re_["gpu_hours"] - 1
        # The chosen point (fewest GPU-hours at the SLO on training days) is scored; the
        # frontier's best point for this goal is shown beside it (not a verdict: it is
        # picked on the scored days).
        best_front = ""
        if re_["cold_starts"]:
            fits = [q for q in c["frontiers"].get("prewarm", [])
                    if "cold_starts" in q and q["gpu_hours"] <= 1.10 * re_["gpu_hours"]]
            if fits:
                q = min(fits, key=lambda q: q["cold_starts"])
                best_front = (f"; frontier best within +10 %: {100 * (1 - q['cold_starts'] / re_['cold_starts']):.0f} % fewer"
                              f" (q={q['knob']} {q.get('release', '')})")
        out["G3a >=80 % fewer node cold starts for <=10 % more GPU-h"] = (
            f"{100 * cold:.0f} % fewer ({p['cold_starts']} vs {re_['cold_starts']}), "
            f"{100 * more:+.1f} % GPU-h{best_front}", cold >= 0.8 and more <= 0.10)
        vs = p["gpu_hours"] / o["gpu_hours"]
        out["G3b <=1.15x oracle GPU-h at the SLO"] = (
            f"{vs:.2f}x at {pct(p['delayed_fraction'])}", vs <= 1.15 and p["delayed_fraction"] <= SLO)
        cov, nom = p.get("band_coverage"), p.get("band_nominal_quantile")
        if cov is None:
            out["G5 band coverage within 5 pt of nominal"] = ("no calibrated band", False)
        else:
            ci = p.get("band_coverage_ci95")
            ci_text = f" [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else ""
            out["G5 band coverage within 5 pt of nominal"] = (
                f"{100 * cov:.1f} %{ci_text} vs {100 * nom:.1f} %", abs(cov - nom) <= 0.05)
    if name in MEMORYLESS:
        env = envelope(buffer_points(c), p["delayed_fraction"])
        if env is None:
            text, ok = f"no buffer point as low as {pct(p['delayed_fraction'])}", True
        else:
            text = f"{p['gpu_hours']:.1f} vs {env:.1f} GPU-h ({100 * (p['gpu_hours'] / env - 1):+.1f} %) at {pct(p['delayed_fraction'])}"
            ok = p["gpu_hours"] <= 1.05 * env
        out["G4 within 5 % of the best buffer's GPU-h at equal delay"] = (text, ok)
    out["(prewarm knob, chosen on)"] = (p["detail"], None)
    return out


def table(results):
    """results: {(workload, lead): [(seed, comparison)]} -> markdown."""
    lines = ["| goal | workload | lead s | per seed | verdict |", "|---|---|---|---|---|"]
    summary = {}
    by_goal = {}
    for (name, lead), runs in results.items():
        for seed, c in runs:
            for goal, (text, ok) in score(name, c).items():
                by_goal.setdefault(goal, {}).setdefault((name, lead), []).append((seed, text, ok))
    for goal in sorted(by_goal):
        for (name, lead), cells in by_goal[goal].items():
            oks = [ok for _, _, ok in cells]
            if goal.startswith("("):
                verdict = ""
            elif all(ok is None for ok in oks):
                verdict = "n/a"
            elif False in oks:
                verdict = f"MISSED ({oks.count(False)}/{len(oks)} seeds)"
            else:
                verdict = "met"
            if verdict in ("met",) or verdict.startswith("MISSED"):
                summary.setdefault(goal, []).append(verdict == "met")
            text = "; ".join(f"s{seed}: {t}" for seed, t, _ in cells)
            lines.append(f"| {goal} | {name} | {lead:.0f} | {text} | {verdict} |")
    lines.append("")
    for goal, oks in sorted(summary.items()):
        lines.append(f"- {goal}: met on {sum(oks)} of {len(oks)} workload x lead cells")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.expanduser("~/.cache/prewarm/target/release/prewarm"))
    ap.add_argument("--traces", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "traces"))
    ap.add_argument("--out", default="out")
    ap.add_argument("--leads", default="90,180")
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--servegen-seeds", default="1,2,3")
    ap.add_argument("--servegen-rate-scale", type=float, default=0.05)
    ap.add_argument("--days", type=int, default=7)
    ap.add_argument("--train-days", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated workloads to run")
    ap.add_argument("--from-json", action="store_true", help="re-render from OUT/goals/*.json")
    args = ap.parse_args()
    out = os.path.join(args.out, "goals")
    os.makedirs(out, exist_ok=True)
    leads = [float(x) for x in args.leads.split(",")]
    only = set(filter(None, args.only.split(",")))
    results = {}
    for name, flags, seeds in workloads(os.path.abspath(args.traces), args):
        if only and name not in only:
            continue
        for seed in [int(s) for s in seeds.split(",") if s]:
            path = os.path.join(out, f"{name}-seed{seed}.json")
            if not args.from_json:
                path = run(args.bin, name, flags, seed, leads, out)
            elif not os.path.exists(path) or os.path.getsize(path) == 0:
                continue
            with open(path) as f:
                for c in json.load(f):
                    results.setdefault((name, c["lead_time_s"]), []).append((seed, c))
    print(table(results))


if __name__ == "__main__":
    main()
