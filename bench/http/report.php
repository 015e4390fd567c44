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

require __DIR__ . '/../common/goals.php';
require __DIR__ . '/../common/median.php';

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
        'requests_per_s' => median(array_map(fn ($m) => $m['wrk']['requests'] / $m['wrk']['duration_us'] * 1e6, $ms)),
        'p50_ms' => median(array_map(fn ($m) => $m['wrk']['p50_us'] / 1e3, $ms)),
        'p99_ms' => median(array_map(fn ($m) => $m['wrk']['p99_us'] / 1e3, $ms)),
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

// The goals: each met (true), missed (false) or not measured (null, with
// what is missing and how to get it in place of the figure).
$goals = [];
$swooleMissing = 'Swoole not at hand (pecl install swoole, or SWOOLE_SO=path/to/swoole.so, then run again)';
$rowMissing = fn (string $what) => "no $what row in this run";
foreach (['hello', 'heavy'] as $app) {
    foreach (['c16', 'c256'] as $l) {
        $b = $ratio('pool', 'swoole-base', $app, $l);
        $p = $ratio('pool', 'swoole-process', $app, $l);
        $where = "app {$apps[$app]}, {$loads[$l]}";
        $goals[] = ["$where: pool ≥ 1.0× Swoole SWOOLE_BASE",
            $b !== null ? $x($b) : ($haveSwoole ? $rowMissing("pool or Swoole $l") : $swooleMissing), $b === null ? null : $b >= 1.0];
        $goals[] = ["$where: pool ≥ 1.5× Swoole SWOOLE_PROCESS",
            $p !== null ? $x($p) : ($haveSwoole ? $rowMissing("pool or Swoole $l") : $swooleMissing), $p === null ? null : $p >= 1.5];
        $pool = $find('pool', $app, $l);
        $base = $find('swoole-base', $app, $l);
        $goals[] = ["$where: pool p99 no worse than Swoole SWOOLE_BASE's",
            $pool && $base ? sprintf('%.2f ms against %.2f ms', $pool['p99_ms'], $base['p99_ms'])
                : ($haveSwoole ? $rowMissing("pool or Swoole $l") : $swooleMissing),
            $pool && $base ? $pool['p99_ms'] <= $base['p99_ms'] : null];
    }
}
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
        : 'the workers took no sample of their HTTP path (no pool row for app (a))',
    $hello && $hello['engine_us'] !== null ? $hello['engine_us'] <= 5.0 : null];
foreach (['hello', 'heavy'] as $app) {
    $p = $find('pool', $app);
    $b = $find('swoole-base', $app);
    $mine = $p && $server_cpu($p) !== null ? $us($server_cpu($p)) . ' µs' : null;
    $theirs = $b && $server_cpu($b) !== null ? $us($server_cpu($b)) . ' µs' : null;
    $goals[] = ["app {$apps[$app]}: CPU per request of the whole server (front + workers) ≤ Swoole SWOOLE_BASE's",
        match (true) {
            $mine && $theirs => "$mine against $theirs",
            $mine === null => 'no CPU figure of the pool (its processes came and went, or no row)',
            $haveSwoole => "$mine; no CPU figure of Swoole",
            default => "$mine; $swooleMissing",
        },
        $mine && $theirs ? $server_cpu($p) <= $server_cpu($b) : null];
}
$fpmMissing = fn (string $what) => "no $what row (apt-get install nginx php8.2-fpm, then run again)";
$heavyFpm = $ratio('pool', 'fpm', 'heavy');
$helloFpm = $ratio('pool', 'fpm', 'hello');
$preload = $ratio('pool', 'fpm-preload', 'heavy');
$goals[] = ['app (b): pool ≥ 20× nginx + PHP-FPM (issue 16)', $heavyFpm === null ? $fpmMissing('nginx + PHP-FPM') : $x($heavyFpm, '%.1f×'),
    $heavyFpm === null ? null : $heavyFpm >= 20];
$goals[] = ['app (b): pool ≥ 5× nginx + PHP-FPM + preload (issue 16)', $preload === null ? $fpmMissing('nginx + PHP-FPM + preload') : $x($preload, '%.1f×'),
    $preload === null ? null : $preload >= 5];
$goals[] = ['app (a): pool ≥ 1.5× nginx + PHP-FPM (issue 16)', $helloFpm === null ? $fpmMissing('nginx + PHP-FPM') : $x($helloFpm),
    $helloFpm === null ? null : $helloFpm >= 1.5];
$leak = $find('leaky', 'leaky');
$reload = $find('pool-reload', 'heavy');
$goals[] = ['app (c) with --max-memory: workers recycle, 0 failed, RSS bounded (issue 16)',
    $leak ? sprintf('%d recycled, %d errors, %.0f MiB', $leak['restarts'], $leak['errors'], $leak['rss_bytes'] / 1048576) : $rowMissing('app (c)'),
    $leak ? $leak['restarts'] > 0 && $leak['errors'] === 0 && $leak['rss_bytes'] < 2 * 150 * 1048576 : null];
$goals[] = ['a reload during a run of app (b): 0 failed (issue 16)', $reload ? sprintf('%d errors', $reload['errors']) : $rowMissing('reload'),
    $reload ? $reload['errors'] === 0 : null];

$summary = goals_summary(array_column($goals, 2));
$md .= "\nLoad: `$load` on loopback; every server with 2 workers on the same 2 CPUs as wrk. CPU per request from /proc:"
    . " *front* the server's other processes (the pool's supervisor, Swoole's master and manager, nginx and the"
    . " PHP-FPM master), *workers* the processes that run PHP, *server* both.\n\n";
$md .= "| goal | measured | |\n|---|---|---|\n";
foreach ($goals as [$what, $got, $ok]) {
    $md .= "| $what | $got | " . goal_cell($ok) . " |\n";
}
$md .= "\n" . goals_line($summary) . "\n";
file_put_contents("$prefix.md", $md);
file_put_contents("$prefix.json", json_encode(['load' => $load, 'rows' => $rows,
    'goals' => array_map(fn ($g) => ['goal' => $g[0], 'measured' => $g[1], 'met' => $g[2] === true,
        'result' => goal_result($g[2])], $goals),
    'goals_summary' => $summary],
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
    // The panels draw apps (a) and (b); the legend names only the servers
    // that have a bar in one of them, in the tables' order.
    $drawn = ['hello', 'heavy'];
    $plotted = array_values(array_filter($rows, fn ($r) => in_array($r['app'], $drawn, true)));
    $legend = array_values(array_filter(array_keys($names),
        fn ($s) => (bool)array_filter($plotted, fn ($r) => $r['server'] === $s)));
    $order = array_flip(array_keys($names));
    // GD's font 2 is 6 px wide: a load's group is as wide as its bars or
    // its label, whichever is wider, so that labels never overlap.
    $textW = fn (string $t) => 6 * strlen($t);
    $panel = intdiv($w - 40, 2);
    [$barW, $barGap, $groupGap, $base] = [22, 4, 30, 380];
    foreach ($drawn as $i => $app) {
        $x0 = 20 + $i * $panel;
        $groups = [];
        foreach (array_keys($loads) as $l) {
            $group = array_values(array_filter($plotted, fn ($r) => $r['app'] === $app && $r['load'] === $l));
            usort($group, fn ($a, $b) => $order[$a['server']] <=> $order[$b['server']]);
            if ($group) {
                $groups[$l] = $group;
            }
        }
        if (!$groups) {
            continue;
        }
        $bars = fn (int $n, int $bw, int $gap) => $n * $bw + ($n - 1) * $gap;
        $natural = array_sum(array_map(fn ($l, $g) => max($bars(count($g), $barW, $barGap), $textW($loads[$l])),
            array_keys($groups), $groups)) + (count($groups) - 1) * $groupGap;
        // Narrower bars when the groups would not fit the panel.
        $scale = min(1.0, ($panel - 40) / max(1, $natural));
        [$bw, $gap] = [max(6, (int)($barW * $scale)), max(1, (int)($barGap * $scale))];
        $max = max(1.0, ...array_map(fn ($r) => $r['requests_per_s'], array_merge(...array_values($groups))));
        imagestring($img, 4, $x0 + 10, 40, $apps[$app], $black);
        imageline($img, $x0 + 10, $base, $x0 + $panel - 20, $base, $grey);
        $gx = $x0 + 15;
        foreach ($groups as $l => $group) {
            $width = max($bars(count($group), $bw, $gap), $textW($loads[$l]));
            imagestring($img, 2, $gx + intdiv($width - $textW($loads[$l]), 2), $base + 4, $loads[$l], $black);
            $bx = $gx + intdiv($width - $bars(count($group), $bw, $gap), 2);
            foreach ($group as $r) {
                $bh = (int)(290 * $r['requests_per_s'] / $max);
                imagefilledrectangle($img, $bx, $base - $bh, $bx + $bw - 1, $base, $colors[$r['server']]);
                imagestringup($img, 2, $bx + intdiv($bw - 12, 2), $base - 5 - $bh,
                    number_format($r['requests_per_s'] / 1000, 1) . 'k', $black);
                $bx += $bw + $gap;
            }
            $gx += $width + $groupGap;
        }
    }
    $lx = 20;
    $ly = 410;
    foreach ($legend as $s) {
        $n = $names[$s];
        if ($lx + 16 + $textW($n) > $w) {
            $lx = 20;
            $ly += 18;
        }
        imagefilledrectangle($img, $lx, $ly, $lx + 12, $ly + 12, $colors[$s]);
        imagestring($img, 2, $lx + 16, $ly, $n, $black);
        $lx += 16 + $textW($n) + 18;
    }
    imagepng($img, "$prefix.png");
}
echo $md;
