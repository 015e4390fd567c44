#!/usr/bin/env python3
"""Merges the rounds of bench/compare.sh into one table: for each headline
figure, the median over the rounds for revision A and for revision B, and
B's cost relative to A's (a time: B/A; a rate: A/B; above 1.00 means B is
slower). Usage: compare.py WORKDIR ROUNDS SHA_A SHA_B [--out FILE.md]"""
import json
import statistics
import sys

# (label, source, selector, figure, kind): kind "time" (lower is better) or
# "rate" (higher is better).
FIGURES = [
    ("shm spin 64 B, p50 µs", "bench", ("shm", "spin", 64), "p50_us", "time"),
    ("shm busy 64 B, p50 µs", "bench", ("shm", "busy", 64), "p50_us", "time"),
    ("shm sleep 64 B, p50 µs", "bench", ("shm", "sleep", 64), "p50_us", "time"),
    ("shm spin 2 KiB, p50 µs", "bench", ("shm", "spin", 2048), "p50_us", "time"),
    ("shm spin 1 MiB, p50 µs", "bench", ("shm", "spin", 1048576), "p50_us", "time"),
    ("shm spin 64 B, pipelined calls/s", "bench", ("shm", "spin", 64),
     "pipelined_calls_per_s", "rate"),
    ("shm spin 64 B, sessions/s", "bench", ("shm", "spin", 64), "sessions_per_s", "rate"),
    ("unix 64 B, p50 µs", "bench", ("unix", "-", 64), "p50_us", "time"),
    ("tcp 64 B, p50 µs", "bench", ("tcp", "-", 64), "p50_us", "time"),
    ("control: bare spin ping-pong 64 B, p50 µs", "bench", ("baseline-spin", "-", 64),
     "p50_us", "time"),
    ("PHP -> C++ daemon, shm 2048 B, one connection, calls/s", "php", (2048, 0),
     "calls_per_s", "rate"),
    ("PHP -> C++ daemon, shm 2048 B, one connection, p50 µs", "php", (2048, 0),
     "p50_us", "time"),
    ("PHP -> C++ daemon, shm 2048 B, connection per call, calls/s", "php", (2048, 1),
     "calls_per_s", "rate"),
]


def pick(records, source, sel, figure):
    for r in records:
        if source == "bench":
            wait = r.get("wait")
            if (r.get("transport"), wait, r.get("size")) == sel and r.get("client") == "rust":
                return r.get(figure)
        elif (r.get("transport"), r.get("size"), r.get("reconnect_every")) == ("shm",) + sel:
            return r.get(figure)
    return None


def load(work, label, i):
    with open(f"{work}/{label}-{i}-bench.json") as f:
        bench = json.load(f)
    with open(f"{work}/{label}-{i}-php.json") as f:
        php = json.load(f)["points"]
    return {"bench": bench, "php": php}


def main():
    work, rounds, sha_a, sha_b = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    out = sys.argv[sys.argv.index("--out") + 1] if "--out" in sys.argv else None
    runs = {lab: [load(work, lab, i) for i in range(1, rounds + 1)] for lab in "AB"}
    rows, raw = [], []
    worst = 0.0
    for label, source, sel, figure, kind in FIGURES:
        vals = {}
        for lab in "AB":
            got = [pick(run[source], source, sel, figure) for run in runs[lab]]
            got = [g for g in got if g is not None]
            vals[lab] = got
        if not vals["A"] or not vals["B"]:
            rows.append(f"| {label} | – | – | – | not measured |")
            continue
        ma, mb = statistics.median(vals["A"]), statistics.median(vals["B"])
        cost = mb / ma if kind == "time" else ma / mb
        if not label.startswith("control"):
            worst = max(worst, cost)
        verdict = "within 5 %" if cost <= 1.05 else "SLOWER by more than 5 %"
        fmt = (lambda v: f"{v:,.3f}") if kind == "time" else (lambda v: f"{v:,.0f}")
        rows.append(f"| {label} | {fmt(ma)} | {fmt(mb)} | {cost:.3f} | {verdict} |")
        raw.append({"figure": label, "kind": kind, "a": vals["A"], "b": vals["B"],
                    "median_a": ma, "median_b": mb, "b_cost_vs_a": cost})
    text = "\n".join([
        f"Revision A = `{sha_a}`, B = `{sha_b}`; median of {rounds} rounds, each "
        "measuring both builds in alternating order (`bench/compare.sh`).",
        "B/A cost: B's time over A's, or A's rate over B's; above 1.000 means B is slower.",
        "",
        f"| figure | A ({sha_a}) | B ({sha_b}) | B/A cost | |",
        "|---|---:|---:|---:|---|",
        *rows,
        "",
        f"Worst B/A cost over the figures (control excluded): {worst:.3f}.",
    ])
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
        with open(out.rsplit(".", 1)[0] + ".json", "w") as f:
            json.dump(raw, f, indent=1)


if __name__ == "__main__":
    main()
