"""What the wait matrices of the bindings (bindings/go/bench.sh,
bindings/python/wait_matrix.py) share for the cells beside an unpinned
CPU hog: where the scheduler puts three runnable threads on two CPUs
changes from run to run, and the hog's share of a CPU under each strategy
tells which placement that strategy's calls got (client and server on one
CPU: the hog keeps the other, ~100 %; spread: the hog shares a CPU,
~50-67 %). The default is then also compared with the best strategy that
left the hog at least as much CPU as the default did: the bound at the
placement the run gave the default."""

# Points of a CPU within which two strategies count as the same placement.
TOLERANCE = 10

# The sentence the tables print under their cells.
NOTE = (
    "hog CPU %: how much of one CPU the hog got while the strategy's calls ran, which shows "
    "where the scheduler put the client and the server: on one CPU (the hog keeps the other, "
    "~100 %) or spread (the hog shares a CPU, ~50-67 %). Which one a run gets changes from run "
    f"to run (docs/known-limits.md). At its placement: the default ÷ the best strategy that "
    f"left the hog as much CPU (within {TOLERANCE} points), the bound where client and server "
    "share a CPU."
)


def at_placement(p50, hog, default):
    """The default's p50 ÷ the best p50 among the strategies whose hog got
    at least as much CPU as under the default (`p50`, `hog`: by strategy)."""
    return p50[default] / min(p for w, p in p50.items() if hog[w] >= hog[default] - TOLERANCE)
