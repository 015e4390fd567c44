<?php
// The table of bench/http/frameworks.sh: per application, the pool and
// its baseline (medians of the rounds), the ratio against the goal: 10x
// PHP-FPM for the frameworks, 0.8x nginx for the static file; then the
// goals (those and the server-sent events' first byte), each met, missed,
// or not measured with what is missing and how to get it, and their count.
//   php frameworks-report.php RESULTS.jsonl OUT_PREFIX "how it was run" [SSE.txt]
// Writes OUT_PREFIX.md and OUT_PREFIX.json; prints the table.

declare(strict_types=1);

require __DIR__ . '/../common/goals.php';
require __DIR__ . '/../common/median.php';

[, $in, $prefix, $how, $sse] = $argv + [null, null, null, '', null];
if ($in === null || $prefix === null) {
    fwrite(STDERR, "usage: frameworks-report.php RESULTS.jsonl OUT_PREFIX HOW [SSE.txt]\n");
    exit(2);
}
$rows = [];
$floors = [];
foreach (file($in, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) as $line) {
    $r = json_decode($line, true, flags: JSON_THROW_ON_ERROR);
    if ($r['server'] === 'floor') {
        // The application alone in a booted process (app-floor.php).
        $floors[$r['app'] . '@' . $r['php']] = $r['floor'] + ['cpus' => $r['cpus']];
        continue;
    }
    $w = $r['wrk'];
    $n = max(1, $w['requests']);
    // A framework's row per PHP version ("symfony@8.4"); rows of runs
    // before versions were recorded are the host's PHP's.
    $key = $r['app'] === 'static' ? 'static' : $r['app'] . '@' . ($r['php'] ?? '8.2');
    $rows[$key][$r['server']][] = [
        'rps' => $w['requests'] / $w['duration_us'] * 1e6,
        'p50_ms' => $w['p50_us'] / 1e3,
        'p99_ms' => $w['p99_us'] / 1e3,
        'errors' => $w['connect_errors'] + $w['read_errors'] + $w['write_errors'] + $w['status_errors'] + $w['timeouts'],
        'server_cpu_us' => $r['cpu_ms']['server'] * 1e3 / $n,
        'load_cpu_us' => $r['cpu_ms']['load'] * 1e3 / $n,
    ];
}

// What each PHP version's Debian carries: 8.2 from Debian 12, 8.4 from
// Debian 13 (the root of ci/php-root.sh).
$frameworks = ['8.2' => ['symfony' => '5.4', 'laravel' => '8.83'], '8.4' => ['symfony' => '6.4', 'laravel' => '10.48']];
$pages = ['static' => 'a static file, 100 KiB: /bench-100k.bin'];
$goals = ['static' => 0.8];
foreach ($frameworks as $php => $v) {
    $pages["symfony@$php"] = "Symfony {$v['symfony']} on PHP $php: /page/bench (2 services, Twig)";
    $pages["laravel@$php"] = "Laravel {$v['laravel']} on PHP $php: /api/bench (route, controller, JSON)";
}
// Goals: the host's PHP always; another version's when this run has it.
$expected = ['symfony@8.2', 'laravel@8.2'];
foreach (array_keys($rows) as $key) {
    if (!in_array($key, $expected, true) && $key !== 'static') {
        $expected[] = $key;
    }
}
foreach ($expected as $key) {
    $goals[$key] = 10.0;
}
ksort($rows);
$names = ['pool' => 'shmlink pool --http (2 workers)', 'fpm' => 'nginx + PHP-FPM (2 children, OPcache)'];
$baselines = ['static' => 'nginx alone (sendfile, tcp_nopush)'];
$pools = ['static' => 'shmlink pool --http --http-root (2 workers)'];
$out = ['how' => $how, 'goal' => 'pool req/s >= 10x FPM (frameworks), >= 0.8x nginx (static file)', 'apps' => []];
$md = "| app | server | req/s | p50 ms | p99 ms | errors | server CPU µs/req | wrk CPU µs/req | pool ÷ baseline | goal |\n"
    . "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n";
// The goals: [goal, measured (or what is missing and how to get it), met (null: not measured)].
$goalRows = [];
$rerun = 'run bench/http/frameworks.sh (ci/setup.sh installs nginx, php-fpm8.2, wrk and the framework packages; ci/php-root.sh 8.4 makes the PHP 8.4 root)';
foreach ($rows as $app => $servers) {
    $med = [];
    foreach ($servers as $server => $runs) {
        $m = [];
        foreach (array_keys($runs[0]) as $k) {
            $m[$k] = $k === 'errors' ? array_sum(array_column($runs, $k)) : median(array_column($runs, $k));
        }
        $med[$server] = $m;
    }
    $ratio = isset($med['pool'], $med['fpm']) && $med['fpm']['rps'] > 0 ? $med['pool']['rps'] / $med['fpm']['rps'] : null;
    $goal = $goals[$app] ?? 10.0;
    $out['apps'][$app] = ['page' => $pages[$app] ?? $app, 'servers' => $med, 'ratio' => $ratio, 'goal' => $goal];
    // The bound: every CPU busy with the application's own work and wrk's,
    // the server adding nothing. Both servers are CPU-bound here, so the
    // ratio a server could reach is FPM's CPU per request (its processes'
    // and wrk's) over that: a figure of CPU time, which other load on the
    // host does not move as it moves requests/s.
    $f = $floors[$app] ?? null;
    if ($f !== null && isset($med['pool'], $med['fpm'])) {
        $floorCpu = $f['cpu_us_per_request'] + $med['pool']['load_cpu_us'];
        $out['apps'][$app]['bound'] = ['app_cpu_us' => $f['cpu_us_per_request'], 'cpus' => $f['cpus'],
            'rps' => $f['cpus'] * 1e6 / $floorCpu,
            'ratio' => ($med['fpm']['server_cpu_us'] + $med['fpm']['load_cpu_us']) / $floorCpu,
            'pool_adds_cpu_us' => $med['pool']['server_cpu_us'] - $f['cpu_us_per_request']];
    }
    foreach (['pool', 'fpm'] as $server) {
        if (!isset($med[$server])) {
            continue;
        }
        $m = $med[$server];
        $last = $server === 'pool' && $ratio !== null ? sprintf('%.2f | ≥ %s', $ratio, $goal) : ' | ';
        $name = $server === 'pool' ? ($pools[$app] ?? $names[$server]) : ($baselines[$app] ?? $names[$server]);
        $md .= sprintf("| %s | %s | %.0f | %.2f | %.2f | %d | %.0f | %.0f | %s |\n",
            $pages[$app] ?? $app, $name, $m['rps'], $m['p50_ms'], $m['p99_ms'], $m['errors'],
            $m['server_cpu_us'], $m['load_cpu_us'], $last);
    }
    if (isset($out['apps'][$app]['bound'])) {
        $b = $out['apps'][$app]['bound'];
        $md .= sprintf("| %s | bound: the app alone in a booted process, no server (app-floor.php): %d CPUs ÷ (its CPU + wrk's); ratio: FPM's CPU per request (server + wrk) ÷ this one's | ≤ %.0f | | | | %.0f | %.0f | ≤ %.2f | |\n",
            $pages[$app], $b['cpus'], $b['rps'], $b['app_cpu_us'], $med['pool']['load_cpu_us'], $b['ratio']);
    }
}
foreach (array_keys($goals) as $app) {
    $a = $out['apps'][$app] ?? null;
    $base = $baselines[$app] ?? $names['fpm'];
    $missing = match (true) {
        $a === null => "no row of $app in this run: $rerun",
        !isset($a['servers']['pool']) => "no row of $app under the pool: $rerun",
        !isset($a['servers']['fpm']) => "no row of $app under $base: $rerun",
        default => "$base answered no request: $rerun",
    };
    $goalRows[] = [sprintf('%s: pool ≥ %s× the requests/s of %s', $pages[$app], $goals[$app], $base),
        isset($a['ratio']) ? sprintf('%.2f×', $a['ratio']) . (isset($a['bound']) ? sprintf(' (bound on this host %.2f×: the app\'s own %.0f µs per request; the pool adds %.0f µs)',
            $a['bound']['ratio'], $a['bound']['app_cpu_us'], $a['bound']['pool_adds_cpu_us']) : '') : $missing,
        isset($a['ratio']) ? $a['ratio'] >= $goals[$app] : null];
}
if ($sse !== null && is_file($sse) && filesize($sse) > 0) {
    // "FIRST_BYTE_S TOTAL_S" per line, from curl.
    $times = array_map(fn ($l) => array_map('floatval', explode(' ', trim($l))),
        file($sse, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES));
    $first = median(array_column($times, 0)) * 1e3;
    $total = median(array_column($times, 1)) * 1e3;
    $out['sse'] = ['first_byte_ms' => $first, 'total_ms' => $total, 'runs' => count($times), 'goal_first_byte_ms' => 50];
    $md .= sprintf("\nServer-sent events (GET /sse, a classic script: flush() of its first event, then 1 s of work; curl, "
        . "%d runs, medians): first byte after **%.1f ms**, the response ends after %.0f ms.\n", count($times), $first, $total);
    $goalRows[] = ['server-sent events: first byte < 50 ms while the handler runs (1 s)',
        sprintf('%.1f ms, the end after %.0f ms', $first, $total), $first < 50 && $total >= 1000];
} else {
    $goalRows[] = ['server-sent events: first byte < 50 ms while the handler runs (1 s)',
        "no SSE timings (SSE.txt, the 4th argument, from curl): $rerun", null];
}
$summary = goals_summary(array_column($goalRows, 2));
$md .= "\n| goal | measured | result |\n|---|---|---|\n";
foreach ($goalRows as [$what, $got, $met]) {
    $md .= "| $what | $got | " . goal_cell($met) . " |\n";
}
$md .= "\n" . goals_line($summary) . "\n";
$out['goals'] = array_map(fn ($g) => ['goal' => $g[0], 'measured' => $g[1], 'result' => goal_result($g[2])], $goalRows);
$out['goals_summary'] = $summary;
$md = "Frameworks under shmlink pool --http against nginx + PHP-FPM, and a static file against nginx ($how)\n\n" . $md;
file_put_contents("$prefix.md", $md);
file_put_contents("$prefix.json", json_encode($out, JSON_PRETTY_PRINT | JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES) . "\n");
echo $md;
