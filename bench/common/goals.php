<?php
/* The one convention of every goals table (bench/http/report.php spells
 * it out too): each goal is met, **missed** (measured, and short of its
 * target) or not measured (what it needs was not at hand in this run: its
 * value cell then says what is missing and how to get it; never counted as
 * missed), and each table ends with one line counting the three. A goal's
 * state here: true (met), false (missed), null (not measured). */

declare(strict_types=1);

/** 'met', 'missed' or 'not measured': a goal's "result" in JSON. */
function goal_result(?bool $met): string
{
    return $met === null ? 'not measured' : ($met ? 'met' : 'missed');
}

/** The result cell of a goals table: met, **missed** or not measured. */
function goal_cell(?bool $met): string
{
    return $met === false ? '**missed**' : goal_result($met);
}

/** ['met' => N, 'missed' => N, 'not_measured' => N] of a list of goal states. */
function goals_summary(array $states): array
{
    $n = fn (?bool $s) => count(array_filter($states, fn (?bool $x) => $x === $s));
    return ['met' => $n(true), 'missed' => $n(false), 'not_measured' => $n(null)];
}

/** The line under a goals table: "Goals: 3 met, 1 missed, 2 not measured." */
function goals_line(array $summary): string
{
    return "Goals: {$summary['met']} met, {$summary['missed']} missed, {$summary['not_measured']} not measured.";
}
