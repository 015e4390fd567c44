<?php
/* Issue 17's figures for the arena, as a markdown table, read from the JSON of
 * `shmlink bench --paths copy,arena,loan` (PATHS.json) and of its 1,000-call
 * point at 1 GiB (MEMORY.json), never typed by hand. Beside each figure
 * whose goal this machine does not reach stands what bounds it, from the
 * same run: a 64 B call in the cache state the loan met, and the loan's own
 * fill (the copy the arena path makes). A goal whose point is not in the
 * files reads "not measured", with the run that makes it; the table ends
 * with how many goals were met, missed and not measured. bench/publish.sh
 * puts the table in docs/benchmarks.md.
 *
 *   php bench/arena-checks.php PATHS.json MEMORY.json */

declare(strict_types=1);

require __DIR__ . '/common/results.php';
require __DIR__ . '/common/goals.php';

[$paths, $memory] = load_args($argv, 'arena-checks', 'PATHS.json MEMORY.json', 2);

const KIB = 1024;
const MIB = 1024 * KIB;
const GIB = 1024 * MIB;

/** The record of $transport, $path and $size, or null. */
function point(array $records, string $transport, string $path, int $size): ?array
{
    foreach ($records as $r) {
        if ($r['transport'] === $transport && ($r['path'] ?? 'copy') === $path && $r['size'] === $size
            && ($r['error'] ?? null) === null) {
            return $r;
        }
    }
    return null;
}


// Where each file's points come from, for a goal whose point is missing.
const PATHS_RUN = 'shmlink bench --paths copy,arena,loan --transports shm,unix --waits busy --no-baselines'
    . ' --sizes 64KiB,16MiB,1GiB --json PATHS.json (ci/main.sh --full)';
const MEMORY_RUN = 'shmlink bench --paths arena,loan --transports shm --waits busy --no-baselines --sizes 1GiB'
    . ' --requests 1000 --duration 900 --json MEMORY.json (ci/main.sh --full)';

/** What is missing from PATHS.json ($what: the points) and how to get it. */
function no_paths(string $what): string
{
    return "$what not in PATHS.json: run " . PATHS_RUN;
}

$rows = [];
$states = [];
/**
 * A row: $value the figure, or what is missing and how to get it when
 * $met is null; $goal like '≤ 2'; $bound: a bound (no goal, no verdict).
 */
$row = function (string $check, string $value, string $goal, ?bool $met, bool $bound = false) use (&$rows, &$states): void {
    if (!$bound) {
        $states[] = $met;
    }
    $rows[] = [$check, $value, $goal, $bound ? '-' : goal_cell($met)];
};

$loan64k = point($paths, 'shm', 'loan', 64 * KIB);
$loan1g = point($paths, 'shm', 'loan', GIB);
$row('shm loan p50 at 1 GiB', $loan1g ? num($loan1g['p50_us']) . ' µs' : no_paths('the shm loan point at 1 GiB'), '≤ 100 µs',
    $loan1g ? $loan1g['p50_us'] <= 100 : null);
$flat = $loan1g && $loan64k ? $loan1g['p50_us'] / $loan64k['p50_us'] : null;
$row('shm loan p50 at 1 GiB ÷ at 64 KiB', $flat === null ? no_paths('the shm loan points at 1 GiB and 64 KiB')
    : sprintf('%s (%s ÷ %s µs)', num($flat), num($loan1g['p50_us']), num($loan64k['p50_us'])), '≤ 2', $flat === null ? null : $flat <= 2);
$cold = $loan1g && $loan64k && $loan1g['control_p50_us'] !== null ? $loan1g['control_p50_us'] / $loan64k['p50_us'] : null;
$row('— bound: a 64 B call right after the 1 GiB fill (no arena) ÷ the loan at 64 KiB', $cold === null
    ? no_paths('the shm loan points at 1 GiB (with its control) and 64 KiB')
    : sprintf('%s (%s µs)', num($cold), num($loan1g['control_p50_us'])), '-', null, true);

$copy16 = point($paths, 'shm', 'copy', 16 * MIB);
$arena16 = point($paths, 'shm', 'arena', 16 * MIB);
$unix16 = point($paths, 'unix', 'copy', 16 * MIB);
$loan16 = point($paths, 'shm', 'loan', 16 * MIB);
$vsCopy = $copy16 && $arena16 ? $copy16['p50_us'] / $arena16['p50_us'] : null;
$row('shm copy p50 ÷ shm arena p50 at 16 MiB', $vsCopy === null ? no_paths('the shm copy and arena points at 16 MiB')
    : sprintf('%s (%s ÷ %s µs)', num($vsCopy), num($copy16['p50_us']), num($arena16['p50_us'])), '≥ 3', $vsCopy === null ? null : $vsCopy >= 3);
$vsUnix = $unix16 && $arena16 ? $unix16['p50_us'] / $arena16['p50_us'] : null;
$row('unix copy p50 ÷ shm arena p50 at 16 MiB', $vsUnix === null ? no_paths('the unix copy and shm arena points at 16 MiB')
    : sprintf('%s (%s ÷ %s µs)', num($vsUnix), num($unix16['p50_us']), num($arena16['p50_us'])), '≥ 10', $vsUnix === null ? null : $vsUnix >= 10);
$ceiling = $unix16 && $loan16 && $loan16['fill_p50_us'] !== null ? $unix16['p50_us'] / $loan16['fill_p50_us'] : null;
$row('— bound: unix copy p50 ÷ the one copy the arena path makes (the loan\'s fill, 16 MiB)', $ceiling === null
    ? no_paths('the unix copy and shm loan points at 16 MiB')
    : sprintf('%s (%s µs)', num($ceiling), num($loan16['fill_p50_us'])), '-', null, true);

$grew = [];
$calls = [];
foreach (['arena', 'loan'] as $path) {
    $p = point($memory, 'shm', $path, GIB);
    if ($p !== null && $p['mem_growth_mib'] !== null) {
        $grew[] = sprintf('%s %.1f MiB', $path, $p['mem_growth_mib']);
        $calls[] = $p['calls'];
        $worst = max($worst ?? 0.0, $p['mem_growth_mib']);
    }
}
$row(sprintf('memory growth (both RSS + arena mapping) from the first call to the last of %s calls of 1 GiB',
    $calls ? number_format(min($calls)) . '+' : '1,000'),
    $grew ? implode(', ', $grew) : 'the shm arena and loan points at 1 GiB (with their memory growth) not in MEMORY.json: run ' . MEMORY_RUN,
    '0 (≤ 1 MiB)', $grew ? ($worst ?? 0.0) <= 1.0 : null);

echo "| check | value | goal | result |\n";
echo "| --- | ---: | ---: | --- |\n";
foreach ($rows as $r) {
    echo '| ' . implode(' | ', $r) . " |\n";
}
echo "\n", goals_line(goals_summary($states)), "\n";
