"""The one convention of every goals table (as bench/common/goals.php):
each goal is met, **missed** (measured, and short of its target) or not
measured (what it needs was not at hand in this run: its value cell then
says what is missing and how to get it; never counted as missed), and each
table ends with one line counting the three. A goal's state here: True
(met), False (missed), None (not measured)."""


def result(met):
    """'met', 'missed' or 'not measured': a goal's "result" in JSON."""
    return "not measured" if met is None else ("met" if met else "missed")


def cell(met):
    """The result cell of a goals table: met, **missed** or not measured."""
    return "**missed**" if met is False else result(met)


def summary(states):
    """The line under a goals table: 'Goals: 3 met, 1 missed, 2 not measured.'"""
    states = list(states)
    met = sum(1 for s in states if s is True)
    missed = sum(1 for s in states if s is False)
    return f"Goals: {met} met, {missed} missed, {len(states) - met - missed} not measured."
