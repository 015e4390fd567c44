<?php
/* The headline ratios of a published run, as markdown bullets: read from the
 * JSON that `shmlink bench` (BENCH.json) and the scenario's bench.php
 * (SCENARIO.json) wrote, never typed by hand. bench/publish.sh puts them in
 * docs/benchmarks.md and the README.
 *
 *   php bench/headline.php BENCH.json SCENARIO.json [LINK]
 *
 * LINK: where the bullets point for details (default docs/benchmarks.md). */

declare(strict_types=1);

require __DIR__ . '/common/results.php';

[$bench, $scenario] = load_args($argv, 'headline', 'BENCH.json SCENARIO.json [LINK]', 2);

/** The first record whose fields match $want, or null. */
function pick(array $records, array $want): ?array
{
    foreach ($records as $r) {
        if (array_intersect_key($r, $want) == $want && ($r['error'] ?? null) === null) {
            return $r;
        }
    }
    return null;
}


$lines = [];
$points = $scenario['points'] ?? [];
foreach ([[2048, 0, 'one persistent connection'], [2048, 1, 'a new connection for every call']] as [$size, $every, $how]) {
    $shm = pick($points, ['label' => 'shm', 'size' => $size, 'reconnect_every' => $every]);
    if ($shm === null) {
        continue;
    }
    $vs = [];
    foreach (['raw unix' => 'plain PHP sockets over unix', 'unix' => 'shmlink over unix',
              'redis broker' => 'a Redis broker round trip'] as $label => $what) {
        $o = pick($points, ['label' => $label, 'size' => $size, 'reconnect_every' => $every]);
        if ($o !== null) {
            $vs[] = sprintf('%s× the calls/s of %s (%s)', num($shm['calls_per_s'] / $o['calls_per_s']), $what,
                num($o['calls_per_s']));
        }
    }
    $lines[] = sprintf('- PHP calling the C++ daemon with %d B requests over %s: shmlink shm makes %s calls/s (p50 %s µs): %s',
        $size, $how, num($shm['calls_per_s']), num($shm['p50_us']), implode(', ', $vs)) . '.';
}
foreach ([64, 2048] as $size) {
    $spin = pick($bench, ['transport' => 'shm', 'wait' => 'spin', 'size' => $size, 'client' => 'rust']);
    $unix = pick($bench, ['transport' => 'baseline-unix', 'size' => $size]);
    $c = pick($bench, ['transport' => 'shm', 'wait' => 'spin', 'size' => $size, 'client' => 'c']);
    if ($spin === null || $unix === null) {
        continue;
    }
    $lines[] = sprintf('- Rust client, %s request, shm with the spin wait: p50 %s µs; a bare Unix-socket round trip takes %s× as long (%s µs)%s.',
        $size >= 1024 ? ($size / 1024) . ' KiB' : "$size B", num($spin['p50_us']), num($unix['p50_us'] / $spin['p50_us']),
        num($unix['p50_us']), $c === null ? '' : sprintf('; the C library\'s client: p50 %s µs (%s× the Rust client)',
            num($c['p50_us']), num($c['p50_us'] / $spin['p50_us'])));
}
if ($lines === []) {
    fwrite(STDERR, "headline: no record to quote in {$argv[1]} or {$argv[2]}\n");
    exit(1);
}
$date = $scenario['meta']['date'] ?? '';
$machine = $scenario['meta']['machine'] ?? '';
echo implode("\n", $lines), "\n\nMeasured $date on $machine; details, commands and plot: [",
    $argv[3] ?? 'docs/benchmarks.md', '](', $argv[3] ?? 'docs/benchmarks.md', ").\n";
