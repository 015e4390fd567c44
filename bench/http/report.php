<?php
/* The HTTP benchmark's report: reads run.sh's results (one JSON line a
 * measurement) and writes PREFIX.md (a table per app: requests/s, latency,
 * errors and CPU per request of each process group, ratios to Swoole and
 * PHP-FPM; the goals of issue 32 and those kept from issue 16 with their
 * verdicts), PREFIX.json and PREFIX.png (requests/s per app, load and
 * server). A server measured in several rounds counts with the median of
 * its rounds (requests/s, p50, p99), its errors summed, its CPU per request
 * over all its rounds.
 *
 *   php report.php RESULTS.jsonl PREFIX "LOAD" */

declare(strict_types=1);

[, $in, $prefix, $load] = $argv;
$lines = array_map(fn ($l) => json_decode($l, true, flags: JSON_THROW_ON_ERROR),
    array_filter(file($in, FILE_IGNORE_NEW_LINES)));
$names = [
    'pool' => 'shmlink pool --http (workers serve HTTP)',
    'front' => 'shmlink pool --http --http-mode front',
    'swoole-base' => 'Swoole 6.2.2 SWOOLE_BASE',
    'swoole-process' => 'Swoole 6.2.2 SWOOLE_PROCESS',
    'floor' => 'floor: a C epoll loop answering from memory',
    'fpm' => 'nginx + PHP-FPM',
    'fpm-preload' => 'nginx + PHP-FPM + opcache.preload',
    'pool-reload' => 'shmlink pool --http, reload during the run',
    'leaky' => 'shmlink pool --http --max-memory 64M',
];
$apps = ['hello' => '(a) hello world', 'heavy' => '(b) bootstrap-heavy', 'leaky' => '(c) leaky'];
$loads = ['c16' => '16 connections', 'c256' => '256 connections', 'close' => '16, Connection: close'];
$errors = fn (array $w) => $w['connect_errors'] + $w['read_errors'] + $w['write_errors']
    + $w['status_errors'] + $w['timeouts'];
$median = function (array $xs): float {
    sort($xs);
    $n = count($xs);
    return $n === 0 ? 0.0 : ($n % 2 ? $xs[intdiv($n, 2)] : ($xs[$n / 2 - 1] + $xs[$n / 2]) / 2);
};

// One row per server, app and load: the medians of its rounds.
$groups = [];
foreach ($lines as $l) {
    $groups[$l['server'] . '|' . $l['app'] . '|' . $l['load']][] = $l;
}
$rows = [];
foreach ($groups as $ms) {
    $reqs = array_sum(array_map(fn ($m) => $m['wrk']['requests'], $ms));
    // No CPU figure where processes came and went during a measurement.
    $steady = !in_array(null, array_column($ms, 'cpu_ms'), true);
    $cpu = fn (string $g) => $steady && $reqs > 0
        ? array_sum(array_map(fn ($m) => $m['cpu_ms'][$g], $ms)) * 1000 / $reqs : null;
    $engine = array_map(fn ($m) => $m['engine'], $ms);
    $samples = array_sum(array_column($engine, 1));
    $rows[] = [
        'server' => $ms[0]['server'], 'app' => $ms[0]['app'], 'load' => $ms[0]['load'],
        'rounds' => count($ms),
        'requests_per_s' => $median(array_map(fn ($m) => $m['wrk']['requests'] / $m['wrk']['duration_us'] * 1e6, $ms)),
        'p50_ms' => $median(array_map(fn ($m) => $m['wrk']['p50_us'] / 1e3, $ms)),
        'p99_ms' => $median(array_map(fn ($m) => $m['wrk']['p99_us'] / 1e3, $ms)),
        'errors' => array_sum(array_map(fn ($m) => $errors($m['wrk']), $ms)),
        'cpu_us' => ['front' => $cpu('front'), 'workers' => $cpu('workers'), 'load' => $cpu('load')],
        'engine_us' => $samples > 0 ? array_sum(array_column($engine, 0)) / $samples / 1e3 : null,
        'rss_bytes' => max(array_column($ms, 'rss_bytes')),
        'restarts' => max(array_column($ms, 'restarts')),
        'measurements' => $ms,
    ];
}
$find = function (string $server, string $app, string $load = 'c16') use ($rows): ?array {
    foreach ($rows as $r) {
        if ($r['server'] === $server && $r['app'] === $app && $r['load'] === $load) {
            return $r;
        }
    }
    return null;
};
$ratio = function (string $a, string $b, string $app, string $load = 'c16') use ($find): ?float {
    $x = $find($a, $app, $load);
    $y = $find($b, $app, $load);
    return $x && $y && $y['requests_per_s'] > 0 ? $x['requests_per_s'] / $y['requests_per_s'] : null;
};
$x = fn (?float $v, string $f = '%.2f×') => $v === null ? '' : sprintf($f, $v);
$server_cpu = fn (array $r) => $r['cpu_us']['front'] === null ? null : $r['cpu_us']['front'] + $r['cpu_us']['workers'];
$us = fn (?float $v, string $f = '%.1f') => $v === null ? '—' : sprintf($f, $v);
$haveSwoole = $find('swoole-base', 'hello') !== null;

$md = '';
foreach (['hello', 'heavy', 'leaky'] as $app) {
    $mine = array_values(array_filter($rows, fn ($r) => $r['app'] === $app));
    if (!$mine) {
        continue;
    }
    $md .= "\n**App {$apps[$app]}**\n\n";
    $md .= "| server | load | requests/s | p50 ms | p99 ms | errors | CPU µs/request: front | workers | wrk | server | vs Swoole BASE | vs Swoole PROCESS | vs nginx + PHP-FPM |\n";
    $md .= "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    $order = array_flip(array_keys($names));
    $lorder = array_flip(array_keys($loads));
    usort($mine, fn ($a, $b) => [$lorder[$a['load']], $order[$a['server']]] <=> [$lorder[$b['load']], $order[$b['server']]]);
    foreach ($mine as $r) {
        $name = $names[$r['server']];
        if ($r['engine_us'] !== null) {
            $name .= sprintf(' (its own HTTP path in the workers: %.1f µs)', $r['engine_us']);
        }
        $md .= sprintf("| %s | %s | %s | %.2f | %.2f | %d | %s | %s | %s | %s | %s | %s | %s |\n",
            $name, $loads[$r['load']], number_format($r['requests_per_s']), $r['p50_ms'], $r['p99_ms'],
            $r['errors'], $us($r['cpu_us']['front']), $us($r['cpu_us']['workers']), $us($r['cpu_us']['load']),
            $us($server_cpu($r), '**%.1f**'),
            $x($ratio($r['server'], 'swoole-base', $app, $r['load'])),
            $x($ratio($r['server'], 'swoole-process', $app, $r['load'])),
            $x($ratio($r['server'], 'fpm', $app, $r['load'])));
    }
}

// The goals.
$goals = [];
foreach (['hello', 'heavy'] as $app) {
    foreach (['c16', 'c256'] as $l) {
        $b = $ratio('pool', 'swoole-base', $app, $l);
        $p = $ratio('pool', 'swoole-process', $app, $l);
        $goals[] = ["app {$apps[$app]}, {$loads[$l]}: pool ≥ 1.0× Swoole SWOOLE_BASE",
            $haveSwoole ? $x($b) : 'Swoole not at hand', $b !== null && $b >= 1.0];
        $goals[] = ["app {$apps[$app]}, {$loads[$l]}: pool ≥ 1.5× Swoole SWOOLE_PROCESS",
            $haveSwoole ? $x($p) : 'Swoole not at hand', $p !== null && $p >= 1.5];
        $pool = $find('pool', $app, $l);
        $base = $find('swoole-base', $app, $l);
        $goals[] = ["app {$apps[$app]}, {$loads[$l]}: pool p99 no worse than Swoole SWOOLE_BASE's",
            $pool && $base ? sprintf('%.2f ms against %.2f ms', $pool['p99_ms'], $base['p99_ms']) : 'Swoole not at hand',
            $pool && $base && $pool['p99_ms'] <= $base['p99_ms']];
    }
}
$pools = array_filter($rows, fn ($r) => in_array($r['server'], ['pool', 'pool-reload', 'leaky'], true));
$dirty = array_filter($rows, fn ($r) => $r['errors'] !== 0);
$goals[] = ['0 errors and 0 non-2xx in every row (the pool\'s and every baseline\'s)',
    $dirty ? implode(', ', array_map(fn ($r) => "{$r['server']} {$r['app']} {$r['load']}: {$r['errors']}", $dirty)) : 'none',
    !$dirty];
$hello = $find('pool', 'hello');
$floor = $find('floor', 'hello');
$goals[] = ['app (a): the pool\'s own HTTP path ≤ 5 µs of CPU per request (sampled in the workers); bound: the floor, a C epoll loop answering from memory, measured in the same run',
    $hello && $hello['engine_us'] !== null
        ? sprintf('%.1f µs; the floor %s µs, so %.1f µs above what the kernel\'s TCP costs', $hello['engine_us'],
            $floor ? $us($server_cpu($floor)) : '?', $hello['engine_us'] - ($floor ? (float)$server_cpu($floor) : 0.0))
        : 'not measured',
    $hello && $hello['engine_us'] !== null && $hello['engine_us'] <= 5.0];
foreach (['hello', 'heavy'] as $app) {
    $p = $find('pool', $app);
    $b = $find('swoole-base', $app);
    $goals[] = ["app {$apps[$app]}: CPU per request of the whole server (front + workers), beside Swoole SWOOLE_BASE's",
        $p ? $us($server_cpu($p)) . ' µs' . ($b ? ' against ' . $us($server_cpu($b)) . ' µs' : '') : '',
        $p !== null && ($b === null || $server_cpu($p) <= $server_cpu($b))];
}
$heavyFpm = $ratio('pool', 'fpm', 'heavy');
$helloFpm = $ratio('pool', 'fpm', 'hello');
$preload = $ratio('pool', 'fpm-preload', 'heavy');
$goals[] = ['app (b): pool ≥ 20× nginx + PHP-FPM (issue 16)', $x($heavyFpm, '%.1f×'), $heavyFpm !== null && $heavyFpm >= 20];
$goals[] = ['app (b): pool ≥ 5× nginx + PHP-FPM + preload (issue 16)', $x($preload, '%.1f×'), $preload !== null && $preload >= 5];
$goals[] = ['app (a): pool ≥ 1.5× nginx + PHP-FPM (issue 16)', $x($helloFpm), $helloFpm !== null && $helloFpm >= 1.5];
$leak = $find('leaky', 'leaky');
$reload = $find('pool-reload', 'heavy');
$goals[] = ['app (c) with --max-memory: workers recycle, 0 failed, RSS bounded (issue 16)',
    $leak ? sprintf('%d recycled, %d errors, %.0f MiB', $leak['restarts'], $leak['errors'], $leak['rss_bytes'] / 1048576) : '',
    $leak && $leak['restarts'] > 0 && $leak['errors'] === 0 && $leak['rss_bytes'] < 2 * 150 * 1048576];
$goals[] = ['a reload during a run of app (b): 0 failed (issue 16)', $reload ? sprintf('%d errors', $reload['errors']) : '',
    $reload && $reload['errors'] === 0];

$md .= "\nLoad: `$load` on loopback; every server with 2 workers on the same 2 CPUs as wrk. CPU per request from /proc:"
    . " *front* the server's other processes (the pool's supervisor, Swoole's master and manager, nginx and the"
    . " PHP-FPM master), *workers* the processes that run PHP, *server* both.\n\n";
$md .= "| goal | measured | |\n|---|---|---|\n";
foreach ($goals as [$what, $got, $ok]) {
    $md .= "| $what | $got | " . ($ok ? 'met' : '**missed**') . " |\n";
}
file_put_contents("$prefix.md", $md);
file_put_contents("$prefix.json", json_encode(['load' => $load, 'rows' => $rows,
    'goals' => array_map(fn ($g) => ['goal' => $g[0], 'measured' => $g[1], 'met' => $g[2]], $goals)],
    JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE) . "\n");

// The plot: a panel per app (hello, heavy), a group of bars per load, a bar per server.
if (function_exists('imagecreatetruecolor')) {
    $w = 1400;
    $h = 460;
    $img = imagecreatetruecolor($w, $h);
    $white = imagecolorallocate($img, 255, 255, 255);
    $black = imagecolorallocate($img, 30, 30, 30);
    $grey = imagecolorallocate($img, 200, 200, 200);
    $palette = [[31, 119, 180], [148, 103, 189], [255, 127, 14], [214, 39, 40], [127, 127, 127], [140, 86, 75],
        [227, 119, 194], [44, 160, 44], [188, 189, 34]];
    $colors = [];
    foreach (array_keys($names) as $i => $s) {
        $colors[$s] = imagecolorallocate($img, ...$palette[$i]);
    }
    imagefill($img, 0, 0, $white);
    imagestring($img, 5, 20, 10, "HTTP requests/s ($load)", $black);
    $panel = intdiv($w - 40, 2);
    foreach (['hello', 'heavy'] as $i => $app) {
        $x0 = 20 + $i * $panel;
        $mine = array_values(array_filter($rows, fn ($r) => $r['app'] === $app));
        if (!$mine) {
            continue;
        }
        $max = max(1.0, ...array_column($mine, 'requests_per_s'));
        imagestring($img, 4, $x0 + 10, 40, $apps[$app], $black);
        imageline($img, $x0 + 10, 380, $x0 + $panel - 20, 380, $grey);
        $bx = $x0 + 15;
        foreach (array_keys($loads) as $l) {
            $group = array_values(array_filter($mine, fn ($r) => $r['load'] === $l));
            if (!$group) {
                continue;
            }
            imagestring($img, 2, $bx, 384, $loads[$l], $black);
            foreach ($group as $r) {
                $bh = (int)(290 * $r['requests_per_s'] / $max);
                imagefilledrectangle($img, $bx, 380 - $bh, $bx + 22, 380, $colors[$r['server']]);
                imagestringup($img, 2, $bx + 5, 375 - $bh, number_format($r['requests_per_s'] / 1000, 1) . 'k', $black);
                $bx += 26;
            }
            $bx += 24;
        }
    }
    $lx = 20;
    $ly = 410;
    foreach ($names as $s => $n) {
        if (!array_filter($rows, fn ($r) => $r['server'] === $s)) {
            continue;
        }
        if ($lx + 16 + 6 * strlen($n) > $w) {
            $lx = 20;
            $ly += 18;
        }
        imagefilledrectangle($img, $lx, $ly, $lx + 12, $ly + 12, $colors[$s]);
        imagestring($img, 2, $lx + 16, $ly, $n, $black);
        $lx += 16 + 6 * strlen($n) + 18;
    }
    imagepng($img, "$prefix.png");
}
echo $md;
