<?php
/* The HTTP benchmark's report: reads run.sh's results (one JSON line a row)
 * and writes PREFIX.md (the table, the goals of issue 16 with their
 * verdicts), PREFIX.json and PREFIX.png (requests/s per app and server).
 *
 *   php report.php RESULTS.jsonl PREFIX "LOAD" */

declare(strict_types=1);

[, $in, $prefix, $load] = $argv;
$rows = array_map(fn ($l) => json_decode($l, true, flags: JSON_THROW_ON_ERROR),
    array_filter(file($in, FILE_IGNORE_NEW_LINES)));
$names = [
    'pool' => 'shmlink pool --http, 2 PHP workers (app (c): --max-memory 64M)',
    'fpm' => 'nginx + PHP-FPM (2 children)',
    'fpm-preload' => 'nginx + PHP-FPM + opcache.preload',
    'pool-reload' => 'shmlink pool --http, reload during the run',
];
$apps = ['hello' => '(a) hello world', 'heavy' => '(b) bootstrap-heavy', 'leaky' => '(c) leaky'];
$rate = fn (array $r) => $r['wrk']['requests'] / $r['wrk']['duration_us'] * 1e6;
$errors = fn (array $r) => $r['wrk']['connect_errors'] + $r['wrk']['read_errors'] + $r['wrk']['write_errors']
    + $r['wrk']['status_errors'] + $r['wrk']['timeouts'];
$find = function (string $server, string $app) use ($rows): ?array {
    foreach ($rows as $r) {
        if ($r['server'] === $server && $r['app'] === $app) {
            return $r;
        }
    }
    return null;
};

$md = "| app | server | requests/s | p50 ms | p99 ms | errors | workers' RSS MiB | restarts | vs nginx + PHP-FPM |\n";
$md .= "|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
foreach ($rows as &$r) {
    $fpm = $find('fpm', $r['app']);
    $r['requests_per_s'] = $rate($r);
    $r['errors'] = $errors($r);
    $r['vs_fpm'] = $fpm ? $r['requests_per_s'] / $rate($fpm) : null;
    $md .= sprintf("| %s | %s | %s | %.2f | %.2f | %d | %.1f | %d | %s |\n",
        $apps[$r['app']], $names[$r['server']], number_format($r['requests_per_s']),
        $r['wrk']['p50_us'] / 1e3, $r['wrk']['p99_us'] / 1e3, $r['errors'],
        $r['rss_bytes'] / 1048576, $r['restarts'], $r['vs_fpm'] === null ? '' : sprintf('%.2f×', $r['vs_fpm']));
}
unset($r);

$ratio = function (string $a, string $b, string $app) use ($find, $rate): float {
    $x = $find($a, $app);
    $y = $find($b, $app);
    return $x && $y ? $rate($x) / $rate($y) : 0.0;
};
$row = fn (string $s, string $a) => $find($s, $a) ?? ['errors' => -1, 'restarts' => 0, 'rss_bytes' => 0];
$reload = $row('pool-reload', 'heavy');
$leak = $row('pool', 'leaky');
$allClean = array_reduce($rows, fn ($ok, $r) => $ok && $errors($r) === 0, true);
$goals = [
    ['app (b): pool ≥ 20× nginx + PHP-FPM', sprintf('%.1f×', $ratio('pool', 'fpm', 'heavy')), $ratio('pool', 'fpm', 'heavy') >= 20],
    ['app (b): pool ≥ 5× nginx + PHP-FPM + preload', sprintf('%.1f×', $ratio('pool', 'fpm-preload', 'heavy')), $ratio('pool', 'fpm-preload', 'heavy') >= 5],
    ['app (a): pool ≥ 1.5× nginx + PHP-FPM', sprintf('%.2f×', $ratio('pool', 'fpm', 'hello')), $ratio('pool', 'fpm', 'hello') >= 1.5],
    ['0 non-2xx and 0 socket errors in every row', $allClean ? 'none' : 'some', $allClean],
    ['app (c) with --max-memory: workers recycle, 0 failed, RSS bounded',
        sprintf('%d recycled, %d errors, %.0f MiB', $leak['restarts'], $errors($leak) ?? -1, $leak['rss_bytes'] / 1048576),
        $leak['restarts'] > 0 && ($leak['errors'] ?? $errors($leak)) === 0 && $leak['rss_bytes'] < 2 * 150 * 1048576],
    ['a reload during a run of app (b): 0 failed', sprintf('%d errors', $errors($reload)), $errors($reload) === 0],
];
$md .= "\nLoad: `$load` on loopback, after a warm-up; every server on the same 2 CPUs as wrk.\n\n";
$md .= "| goal (issue 16) | measured | |\n|---|---|---|\n";
foreach ($goals as [$what, $got, $ok]) {
    $md .= "| $what | $got | " . ($ok ? 'met' : '**missed**') . " |\n";
}
file_put_contents("$prefix.md", $md);
file_put_contents("$prefix.json", json_encode(['load' => $load, 'rows' => $rows,
    'goals' => array_map(fn ($g) => ['goal' => $g[0], 'measured' => $g[1], 'met' => $g[2]], $goals)],
    JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE) . "\n");

// The plot: one panel per app, a bar per server, requests/s.
if (function_exists('imagecreatetruecolor')) {
    $w = 1200;
    $h = 420;
    $img = imagecreatetruecolor($w, $h);
    $white = imagecolorallocate($img, 255, 255, 255);
    $black = imagecolorallocate($img, 30, 30, 30);
    $grey = imagecolorallocate($img, 200, 200, 200);
    $colors = ['pool' => imagecolorallocate($img, 31, 119, 180), 'fpm' => imagecolorallocate($img, 214, 39, 40),
        'fpm-preload' => imagecolorallocate($img, 255, 127, 14), 'pool-reload' => imagecolorallocate($img, 44, 160, 44)];
    imagefill($img, 0, 0, $white);
    imagestring($img, 5, 20, 10, "HTTP requests/s ($load)", $black);
    $panel = intdiv($w - 40, 3);
    $i = 0;
    foreach ($apps as $app => $label) {
        $x0 = 20 + $i++ * $panel;
        $mine = array_values(array_filter($rows, fn ($r) => $r['app'] === $app));
        $max = max(1.0, ...array_map($rate, $mine));
        imagestring($img, 4, $x0 + 10, 40, $label, $black);
        imageline($img, $x0 + 10, 360, $x0 + $panel - 20, 360, $grey);
        $bw = intdiv($panel - 40, max(1, count($mine)));
        foreach ($mine as $k => $r) {
            $bh = (int)(280 * $rate($r) / $max);
            $bx = $x0 + 15 + $k * $bw;
            imagefilledrectangle($img, $bx, 360 - $bh, $bx + $bw - 10, 360, $colors[$r['server']]);
            imagestring($img, 3, $bx, 345 - $bh, number_format($rate($r)), $black);
        }
    }
    $lx = 20;
    foreach ($names as $s => $n) {
        imagefilledrectangle($img, $lx, 385, $lx + 12, 397, $colors[$s]);
        imagestring($img, 2, $lx + 16, 384, $n, $black);
        $lx += 16 + 6 * strlen($n) + 18;
    }
    imagepng($img, "$prefix.png");
}
echo $md;
