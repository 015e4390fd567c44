<?php
/* The PHP client's figures: calls/s and per-call latency of Shmlink\Client
 * over shm:, unix: and tcp: against a running server, for each request size
 * and reconnect mode, next to a PHP-native baseline (the sockets extension,
 * 4-byte little-endian length framing) and the Rust client's round trip.
 *
 *   php -d extension=bindings/php/modules/shmlink.so bench/php/bench.php \
 *       --shm ADDR --unix ADDR --tcp ADDR [--raw-unix PATH] [--raw-tcp HOST:PORT] \
 *       [--redis HOST:PORT] [--pool1 ADDR] [--pool2 ADDR] \
 *       [--requests N] [--sizes 2048,128,64] [--reconnect-every 0,10,1] \
 *       [--reply ceil|floor] [--raw-reply floor|ceil] [--wait spin|sleep|busy] \
 *       [--rust-bin PATH] [--rust-duration SECONDS] [--no-rust] [--server TEXT] \
 *       [--json FILE] [--markdown FILE]
 *
 * Each point makes N calls with N distinct payloads of S bytes, generated
 * (with the expected responses) before the clock starts. Reconnect mode M:
 * 0 = one connection for all N calls (opened before the clock starts), M > 0
 * = a new non-persistent client every M calls (1 = a connection per call);
 * a call's latency then includes closing the previous client and
 * connecting. Every response is checked: the server replies with the first
 * ceil(S/8) (`shmlink echo`) or floor(S/8) (the example daemon, and every
 * raw server) bytes; --reply and --raw-reply say which.
 *
 * --redis measures a Redis broker round trip instead (bench/redis/worker.php
 * must be serving that Redis; it replies floor(S/8) bytes). Rows show their
 * p50 and calls/s against shmlink shm's at the same size and reconnect mode.
 *
 * Progress goes to stderr: a bar redrawn in place on a terminal, a line a
 * point otherwise.
 *
 * The Rust figure comes from `shmlink bench --connect SHM --sizes 64`, run
 * right before PHP's shm 64 B one-connection point as a child of this
 * process (it inherits this process's CPU affinity), with the same wait
 * strategy and --rust-duration seconds per phase (default 1.0).
 *
 * --pool1 and --pool2 measure `shmlink pool` addresses (shm:) served by one
 * and by two PHP workers (bench/pool/worker.php) like the shm rows, labelled
 * "pool, 1 PHP worker" and "pool, 2 PHP workers"; their goals compare their
 * calls/s with the daemon's over shm.
 *
 * --server TEXT describes the server in the report.
 *
 * Prints one table and the goals, each met, **missed** or not measured (a
 * figure this run could not make: the row says what is missing and how to
 * get it; never counted as missed), then "Goals: N met, N missed, N not
 * measured."; the JSON gives each goal its "result" and the counts in
 * "goals_summary". Exits 1 when a call failed or a response was wrong, 2 on
 * bad usage, else 0 (a missed goal included). */

declare(strict_types=1);

require __DIR__ . '/clients.php';
require __DIR__ . '/../common/goals.php';
require __DIR__ . '/../common/median.php';
require __DIR__ . '/progress.php';

ini_set('memory_limit', '-1');

const USAGE = <<<'TXT'
usage: php -d extension=shmlink.so bench.php [--shm ADDR] [--unix ADDR] [--tcp ADDR]
         [--raw-unix PATH] [--raw-tcp HOST:PORT] [--redis HOST:PORT] [--pool1 ADDR] [--pool2 ADDR]
         [--requests N] [--sizes 2048,128,64]
         [--reconnect-every 0,10,1] [--reply ceil|floor] [--raw-reply floor|ceil]
         [--wait spin|sleep|busy] [--rust-bin PATH] [--rust-duration SECONDS] [--no-rust]
         [--server TEXT] [--json FILE] [--markdown FILE] [--versions FILE]
TXT;

/** The goals of the issue: [label, figure key, comparison, goal]. */
const GOALS = [
    ['shm 2048 B, one connection: calls/s', 'shm_2048_calls_per_s', '>=', 300000],
    ['PHP p50 / Rust p50, shm 64 B, one connection', 'php_over_rust_p50_64', '<=', 1.5],
    ['shm, reconnect every call: calls/s (slowest size)', 'shm_reconnect_calls_per_s', '>=', 10000],
    ['pool of 1 PHP worker ÷ C++ daemon, shm 2048 B, one connection: calls/s', 'pool1_vs_daemon', '>=', 0.5],
    ['pool of 2 PHP workers ÷ C++ daemon, shm 2048 B, one connection: calls/s', 'pool2_vs_daemon', '>=', 0.4],
    ['PHP 8.4 ÷ PHP 8.2, shm 2048 B, one connection: calls/s (medians of alternating rounds)', 'php84_vs_php82', '>=', 0.9],
];

function usage(string $why): never
{
    fwrite(STDERR, "bench.php: $why\n" . USAGE . "\n");
    exit(2);
}

/** A comma-separated list of non-negative integers. */
function int_list(string $value, string $option): array
{
    $out = [];
    foreach (explode(',', $value) as $item) {
        $item = trim($item);
        if ($item === '' || !ctype_digit($item)) {
            usage("$option expects comma-separated non-negative integers, got \"$value\"");
        }
        $out[] = (int)$item;
    }
    return $out;
}

function parse_options(array $argv): array
{
    $spec = ['shm:', 'unix:', 'tcp:', 'raw-unix:', 'raw-tcp:', 'redis:', 'pool1:', 'pool2:', 'requests:', 'sizes:', 'reconnect-every:',
             'reply:', 'raw-reply:', 'wait:', 'rust-bin:', 'rust-duration:', 'no-rust', 'server:', 'json:',
             'markdown:', 'versions:', 'help'];
    $known = array_map(fn ($s) => '--' . rtrim($s, ':'), $spec);
    for ($i = 1; $i < count($argv); $i++) {
        $name = explode('=', $argv[$i], 2)[0];
        if (!in_array($name, $known, true)) {
            usage("unknown argument \"{$argv[$i]}\"");
        }
        if (str_ends_with($spec[array_search($name, $known, true)], ':') && !str_contains($argv[$i], '=')) {
            $i++; // its value
        }
    }
    $o = getopt('', $spec);
    if (isset($o['help'])) {
        echo USAGE, "\n";
        exit(0);
    }
    foreach ($o as $k => $v) {
        if (is_array($v)) {
            usage("--$k given twice");
        }
    }
    $opt = [
        'transports' => [],
        'raw' => [],
        'redis' => $o['redis'] ?? null,
        'pools' => array_filter(['pool, 1 PHP worker' => $o['pool1'] ?? null, 'pool, 2 PHP workers' => $o['pool2'] ?? null]),
        'requests' => (int)($o['requests'] ?? 100000),
        'sizes' => int_list($o['sizes'] ?? '2048,128,64', '--sizes'),
        'reconnect' => int_list($o['reconnect-every'] ?? '0,10,1', '--reconnect-every'),
        'reply' => $o['reply'] ?? 'ceil',
        'raw_reply' => $o['raw-reply'] ?? 'floor',
        'wait' => $o['wait'] ?? null,
        'rust_bin' => isset($o['no-rust']) ? null : ($o['rust-bin'] ?? dirname(__DIR__, 2) . '/target/release/shmlink'),
        'rust_duration' => $o['rust-duration'] ?? '1.0',
        'server' => $o['server'] ?? null,
        'json' => $o['json'] ?? null,
        'markdown' => $o['markdown'] ?? null,
        'versions' => $o['versions'] ?? null,
    ];
    foreach (['shm', 'unix', 'tcp'] as $t) {
        if (isset($o[$t])) {
            if (!str_starts_with($o[$t], "$t:")) {
                usage("--$t expects a $t: address, got \"{$o[$t]}\"");
            }
            $opt['transports'][$t] = $o[$t];
        }
    }
    foreach (['raw-unix' => 'unix', 'raw-tcp' => 'tcp'] as $flag => $kind) {
        if (isset($o[$flag])) {
            $opt['raw'][$kind] = preg_replace("/^$kind:/", '', $o[$flag]);
        }
    }
    foreach ($opt['pools'] as $label => $address) {
        if (!str_starts_with($address, 'shm:')) {
            usage("--pool1/--pool2 expect a shm: address, got \"$address\"");
        }
    }
    if ($opt['transports'] === [] && $opt['raw'] === [] && $opt['redis'] === null && $opt['pools'] === []) {
        usage('nothing to measure: give --shm, --unix, --tcp, --raw-unix, --raw-tcp or --redis');
    }
    if (!ctype_digit((string)($o['requests'] ?? '1')) || $opt['requests'] < 1) {
        usage('--requests expects a positive integer');
    }
    foreach (['reply', 'raw_reply'] as $k) {
        if (!in_array($opt[$k], ['ceil', 'floor'], true)) {
            usage('--' . strtr($k, '_', '-') . ' is ceil or floor');
        }
    }
    if (!is_numeric($opt['rust_duration']) || (float)$opt['rust_duration'] <= 0) {
        usage('--rust-duration expects a positive number of seconds');
    }
    if ($opt['wait'] !== null && !in_array($opt['wait'], ['spin', 'sleep', 'busy'], true)) {
        usage('--wait is spin, sleep or busy');
    }
    if ($opt['raw'] !== [] && !extension_loaded('sockets')) {
        usage('--raw-unix/--raw-tcp need the sockets extension');
    }
    if ($opt['redis'] !== null && !extension_loaded('redis')) {
        usage('--redis needs the redis extension (Debian: php8.2-redis)');
    }
    if ($opt['redis'] !== null && !preg_match('/^(\[[^\]]+\]|[^:]+):\d+$/', $opt['redis'])) {
        usage("--redis expects HOST:PORT, got \"{$opt['redis']}\"");
    }
    if ($opt['transports'] !== [] && !extension_loaded('shmlink')) {
        usage('the shmlink extension is not loaded (php -d extension=.../shmlink.so)');
    }
    return $opt;
}

/**
 * One point: N calls through clients made by $connect, a new one every
 * $every calls (0: one for all, connected before the clock starts).
 * Returns [calls/s, p50 µs, p99 µs]; throws on a failed call or a wrong
 * response.
 */
function measure(callable $connect, array $payloads, array $expected, int $every): array
{
    $n = count($payloads);
    // Warm-up on its own connection: code paths, caches, the server's threads.
    $c = $connect();
    for ($i = 0, $w = min($n, 1000); $i < $w; $i++) {
        $r = $c->call($payloads[$i]);
        if ($r !== $expected[$i]) {
            throw new RuntimeException(wrong_response("warm-up call $i", strlen($payloads[$i]), $expected[$i], $r));
        }
    }
    $c->close();
    $c = null;

    $lat = array_fill(0, $n, 0);
    $wrong = null;
    gc_disable();
    if ($every === 0) {
        $c = $connect();
        $start = hrtime(true);
        for ($i = 0; $i < $n; $i++) {
            $t = hrtime(true);
            $r = $c->call($payloads[$i]);
            $lat[$i] = hrtime(true) - $t;
            if ($r !== $expected[$i] && $wrong === null) {
                $wrong = wrong_response("call $i", strlen($payloads[$i]), $expected[$i], $r);
            }
        }
        $elapsed = hrtime(true) - $start;
    } else {
        $start = hrtime(true);
        for ($i = 0; $i < $n; $i++) {
            $t = hrtime(true);
            if ($i % $every === 0) {
                $c?->close();
                $c = $connect();
            }
            $r = $c->call($payloads[$i]);
            $lat[$i] = hrtime(true) - $t;
            if ($r !== $expected[$i] && $wrong === null) {
                $wrong = wrong_response("call $i", strlen($payloads[$i]), $expected[$i], $r);
            }
        }
        $elapsed = hrtime(true) - $start;
    }
    $c->close();
    gc_enable();
    if ($wrong !== null) {
        throw new RuntimeException($wrong);
    }
    sort($lat);
    $at = fn (float $q) => $lat[max(0, (int)ceil($q * $n) - 1)] / 1000;
    return [$n / ($elapsed / 1e9), $at(0.50), $at(0.99)];
}

function wrong_response(string $call, int $size, string $expected, string $got): string
{
    return sprintf('wrong response to %s (%d B): expected its first %d bytes, got %d bytes%s', $call, $size,
        strlen($expected), strlen($got), str_starts_with($expected, $got) || str_starts_with($got, $expected)
            ? ' of it (--reply ceil/floor?)' : ' that differ');
}

/** N distinct payloads of $size bytes (a counter in the first bytes, the rest random). */
function payloads(int $n, int $size): array
{
    $out = [];
    $fill = $size > 0 ? random_bytes($size) : '';
    for ($i = 0; $i < $n; $i++) {
        // Distinct (for S >= 4) and not trivially compressible.
        $p = $size >= 4 ? substr_replace($fill, pack('V', $i), ($i * 7) % ($size - 3), 4) : $fill;
        $out[] = $size >= 8 ? substr_replace($p, random_bytes(4), $size - 4, 4) : $p;
    }
    return $out;
}

/** The expected responses: the first ceil or floor of S/8 bytes of each payload. */
function expected(array $payloads, int $size, string $reply): array
{
    $len = $reply === 'ceil' ? intdiv($size + 7, 8) : intdiv($size, 8);
    return array_map(fn ($p) => substr($p, 0, $len), $payloads);
}

/** The Rust client's shm record at 64 B from `shmlink bench --connect`, or null with a note. */
function rust_bench(string $bin, string $address, ?string $wait, string $duration): array
{
    if (!is_executable($bin)) {
        return [null, "no Rust figure: $bin not found"];
    }
    $json = tempnam(sys_get_temp_dir(), 'shmlink-rust-bench');
    $cmd = [$bin, 'bench', '--connect', $address, '--sizes', '64', '--waits', $wait ?? 'spin',
            '--duration', $duration, '--no-baselines', '--no-pin', '--quiet', '--json', $json];
    $p = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['file', '/dev/null', 'w'], 2 => ['pipe', 'w']], $pipes);
    $err = stream_get_contents($pipes[2]);
    fclose($pipes[2]);
    $status = proc_close($p);
    $records = json_decode((string)@file_get_contents($json), true);
    @unlink($json);
    if ($status !== 0 || !is_array($records)) {
        return [null, "no Rust figure: `shmlink bench` failed (exit $status): " . trim((string)$err)];
    }
    foreach ($records as $r) {
        if (($r['transport'] ?? '') === 'shm' && ($r['size'] ?? 0) === 64 && ($r['client'] ?? 'rust') === 'rust') {
            return [$r, null];
        }
    }
    return [null, 'no Rust figure: no shm 64 B record in the output of `shmlink bench`'];
}

function fmt_int(float $v): string
{
    return number_format($v, 0, '.', ',');
}

function fmt_us(float $v): string
{
    return $v >= 100 ? number_format($v, 0, '.', '') : ($v >= 10 ? sprintf('%.1f', $v) : sprintf('%.2f', $v));
}

/** Characters in a UTF-8 string (mbstring may be missing). */
function width(string $s): int
{
    return (int)preg_match_all('/./su', $s);
}

/** A markdown table with aligned columns; $right: columns aligned right. */
function table(array $head, array $rows, array $right): string
{
    $w = array_map('width', $head);
    foreach ($rows as $row) {
        foreach ($row as $i => $cell) {
            $w[$i] = max($w[$i], width((string)$cell));
        }
    }
    $line = function (array $cells) use ($w, $right) {
        $out = [];
        foreach ($cells as $i => $c) {
            $pad = str_repeat(' ', $w[$i] - width((string)$c));
            $out[] = in_array($i, $right, true) ? $pad . $c : $c . $pad;
        }
        return '| ' . implode(' | ', $out) . " |\n";
    };
    $sep = [];
    foreach ($w as $i => $n) {
        $sep[] = in_array($i, $right, true) ? str_repeat('-', max(1, $n - 1)) . ':' : str_repeat('-', $n);
    }
    return $line($head) . $line($sep) . implode('', array_map($line, $rows));
}

// --- main ---

$opt = parse_options($argv);
$n = $opt['requests'];
$clientOptions = ['timeout' => 5.0] + ($opt['wait'] !== null ? ['wait' => $opt['wait']] : []);
$notes = [];
$failures = [];

// The Rust client on the same server, just before PHP's shm 64 B point (so
// that a shared machine's drift weighs on both alike), or first when 64 B
// is not measured.
$rust = null;
$progress = new Progress();
$runRust = function () use ($opt, &$rust, &$notes, $progress) {
    if (!isset($opt['transports']['shm']) || $opt['rust_bin'] === null || $rust !== null) {
        return;
    }
    $progress->note('Rust client, shm 64 B (shmlink bench --connect)');
    [$rust, $note] = rust_bench($opt['rust_bin'], $opt['transports']['shm'], $opt['wait'], $opt['rust_duration']);
    if ($note !== null) {
        $notes[] = $note;
    }
};
if (!in_array(64, $opt['sizes'], true) || !in_array(0, $opt['reconnect'], true)) {
    $runRust();
}

$targets = [];
foreach ($opt['transports'] as $t => $address) {
    $targets[] = ['client' => 'php-shmlink', 'transport' => $t, 'label' => $t, 'reply' => $opt['reply'],
                  'connect' => fn () => new Shmlink\Client($address, $clientOptions)];
}
foreach ($opt['pools'] as $label => $address) {
    $targets[] = ['client' => 'php-shmlink', 'transport' => 'shm', 'label' => $label, 'reply' => 'floor',
                  'connect' => fn () => new Shmlink\Client($address, $clientOptions)];
}
foreach ($opt['raw'] as $kind => $target) {
    $targets[] = ['client' => 'php-sockets', 'transport' => $kind, 'label' => "raw $kind", 'reply' => $opt['raw_reply'],
                  'connect' => fn () => new RawClient($kind, $target)];
}
if ($opt['redis'] !== null) {
    $redisTarget = $opt['redis'];
    $targets[] = ['client' => 'php-redis', 'transport' => 'redis', 'label' => 'redis broker', 'reply' => 'floor',
                  'connect' => fn () => new RedisBrokerClient($redisTarget)];
}

$progress->total = count($opt['sizes']) * count($targets) * count($opt['reconnect']);

$points = [];
foreach ($opt['sizes'] as $size) {
    $payloads = payloads($n, $size);
    $expected = [];
    foreach ($targets as $target) {
        $exp = $expected[$target['reply']] ??= expected($payloads, $size, $target['reply']);
        foreach ($opt['reconnect'] as $every) {
            if ($target['label'] === 'shm' && $size === 64 && $every === 0) {
                $runRust();
            }
            $progress->next(sprintf('%s, %d B, %s', $target['label'], $size, $every === 0 ? 'one connection' : "reconnect every $every"));
            $point = ['client' => $target['client'], 'transport' => $target['transport'], 'label' => $target['label'],
                      'size' => $size, 'reply_size' => strlen($exp[0] ?? ''), 'reconnect_every' => $every, 'calls' => $n,
                      'calls_per_s' => null, 'p50_us' => null, 'p99_us' => null, 'p50_vs_shm' => null,
                      'shm_calls_ratio' => null, 'error' => null];
            try {
                [$point['calls_per_s'], $point['p50_us'], $point['p99_us']] =
                    measure($target['connect'], $payloads, $exp, $every);
            } catch (Throwable $e) {
                $point['error'] = get_class($e) . ': ' . $e->getMessage();
                $failures[] = "{$target['label']} $size B reconnect $every: {$point['error']}";
                $progress->note("FAILED: {$point['error']}");
            }
            $points[] = $point;
        }
    }
    unset($payloads, $expected, $exp);
}

$progress->done();

// p50 and calls/s relative to shm at the same size and reconnect mode.
$find = function (string $label, int $size, int $every) use (&$points): ?array {
    foreach ($points as $p) {
        if ($p['label'] === $label && $p['size'] === $size && $p['reconnect_every'] === $every && $p['error'] === null) {
            return $p;
        }
    }
    return null;
};
foreach ($points as &$p) {
    $shm = $find('shm', $p['size'], $p['reconnect_every']);
    if ($shm !== null && $p['error'] === null && $shm['p50_us'] > 0) {
        $p['p50_vs_shm'] = $p['p50_us'] / $shm['p50_us'];
    }
    if ($shm !== null && $p['error'] === null && $p['calls_per_s'] > 0) {
        $p['shm_calls_ratio'] = $shm['calls_per_s'] / $p['calls_per_s'];
    }
}
unset($p);

// The goals.
$figures = [
    'shm_2048_calls_per_s' => $find('shm', 2048, 0)['calls_per_s'] ?? null,
    'php_over_rust_p50_64' => null,
    'shm_reconnect_calls_per_s' => null,
    'pool1_vs_daemon' => null,
    'pool2_vs_daemon' => null,
    'php84_vs_php82' => null,
];
// --versions: {"8.2": {"php": "8.2.x", "calls_per_s": [...]}, "8.4": ...},
// the rounds bench/scenario/run.sh --php measured.
$versions = null;
if (isset($opt['versions'])) {
    $versions = json_decode((string)@file_get_contents($opt['versions']), true);
    if (!is_array($versions)) {
        usage("--versions: cannot read {$opt['versions']} as JSON");
    }
}
if (!empty($versions['8.2']['calls_per_s']) && !empty($versions['8.4']['calls_per_s'])) {
    $figures['php84_vs_php82'] = median($versions['8.4']['calls_per_s']) / median($versions['8.2']['calls_per_s']);
}
$daemon2048 = $find('shm', 2048, 0);
foreach (['pool1_vs_daemon' => 'pool, 1 PHP worker', 'pool2_vs_daemon' => 'pool, 2 PHP workers'] as $key => $label) {
    $p = $find($label, 2048, 0);
    if ($p !== null && $daemon2048 !== null && $daemon2048['calls_per_s'] > 0) {
        $figures[$key] = $p['calls_per_s'] / $daemon2048['calls_per_s'];
    }
}
$php64 = $find('shm', 64, 0);
if ($php64 !== null && $rust !== null && $rust['p50_us'] > 0) {
    $figures['php_over_rust_p50_64'] = $php64['p50_us'] / $rust['p50_us'];
}
$slowestSize = null;
foreach ($opt['sizes'] as $size) {
    $p = $find('shm', $size, 1);
    if ($p !== null && ($figures['shm_reconnect_calls_per_s'] === null || $p['calls_per_s'] < $figures['shm_reconnect_calls_per_s'])) {
        $figures['shm_reconnect_calls_per_s'] = $p['calls_per_s'];
        $slowestSize = $size;
    }
}
// What a goal needs that this run did not measure, and how to get it.
$sizesFlag = fn (int $size) => in_array($size, $opt['sizes'], true) ? '' : " (add $size to --sizes)";
$connectFlag = in_array(0, $opt['reconnect'], true) ? '' : ' (add 0 to --reconnect-every)';
$noShm = 'no --shm address: give --shm ADDR (ci/php-bench.sh and bench/scenario/run.sh start a server)';
$missing = [
    'shm_2048_calls_per_s' => isset($opt['transports']['shm'])
        ? 'no shm 2048 B one-connection point' . $sizesFlag(2048) . $connectFlag : $noShm,
    'php_over_rust_p50_64' => match (true) {
        !isset($opt['transports']['shm']) => $noShm,
        $opt['rust_bin'] === null => 'the Rust client was not run (--no-rust): run without --no-rust, with 64 in --sizes'
            . ' and 0 in --reconnect-every, as ci/php-bench.sh does',
        !is_executable($opt['rust_bin']) => "the Rust client {$opt['rust_bin']} is not built: cargo build --release -p shmlink-cli",
        $rust === null => 'the Rust client gave no figure (see its note): run again',
        default => 'no shm 64 B one-connection point' . $sizesFlag(64) . $connectFlag,
    },
    'shm_reconnect_calls_per_s' => isset($opt['transports']['shm'])
        ? 'no shm reconnect-every-call point' . (in_array(1, $opt['reconnect'], true) ? '' : ' (add 1 to --reconnect-every)')
        : $noShm,
];
foreach (['pool1_vs_daemon' => ['pool, 1 PHP worker', '--pool1'], 'pool2_vs_daemon' => ['pool, 2 PHP workers', '--pool2']]
         as $key => [$label, $flag]) {
    $missing[$key] = isset($opt['pools'][$label])
        ? ($daemon2048 === null ? $missing['shm_2048_calls_per_s'] : "no $label 2048 B one-connection point")
        : "no `shmlink pool` given: give $flag ADDR (bench/scenario/run.sh starts the pools)";
}
$missing['php84_vs_php82'] = $versions === null
    ? 'PHP 8.4 was not measured: run bench/scenario/run.sh --php 8.2,8.4 (ci/main.sh --full does; ci/php-root.sh 8.4 makes the root)'
    : 'no rounds of both PHP 8.2 and 8.4 in ' . $opt['versions'];
$goals = [];
$goalStates = [];
foreach (GOALS as [$label, $key, $cmp, $goal]) {
    $v = $figures[$key];
    $met = $v === null ? null : ($cmp === '>=' ? $v >= $goal : $v <= $goal);
    if ($key === 'shm_reconnect_calls_per_s' && $slowestSize !== null) {
        $label = str_replace('(slowest size)', "(slowest size: $slowestSize B)", $label);
    }
    $goals[] = ['check' => $label, 'value' => $v, 'goal' => "$cmp $goal", 'result' => goal_result($met)]
        + ($met === null ? ['missing' => $missing[$key]] : []);
    $goalStates[] = $met;
}
$goalsSummary = goals_summary($goalStates);

// The report.
$rows = [];
$reconnect = fn (int $every) => $every === 0 ? 'never' : "every $every";
foreach ($points as $p) {
    $rows[] = $p['error'] !== null
        ? [$p['label'], "{$p['size']} B", $reconnect($p['reconnect_every']), 'FAILED', '-', '-', '-', '-']
        : [$p['label'], "{$p['size']} B", $reconnect($p['reconnect_every']),
           fmt_int($p['calls_per_s']), fmt_us($p['p50_us']), fmt_us($p['p99_us']),
           $p['p50_vs_shm'] === null ? '-' : sprintf('%.2f', $p['p50_vs_shm']),
           $p['shm_calls_ratio'] === null ? '-' : sprintf('%.2f×', $p['shm_calls_ratio'])];
}
$results = table(['transport', 'size', 'reconnect', 'calls/s', 'p50 µs', 'p99 µs', 'p50 ÷ shm', 'shm calls/s ÷ this'],
    $rows, [1, 3, 4, 5, 6, 7]);
$goalRows = [];
foreach ($goals as $i => $g) {
    $v = $g['value'];
    $goalRows[] = [$g['check'], $v === null ? $g['missing'] : ($v >= 1000 ? fmt_int($v) : sprintf('%.2f', $v)),
                   preg_replace_callback('/\d+(\.\d+)?$/', fn ($m) => $m[0] >= 1000 ? fmt_int((float)$m[0]) : sprintf('%.2f', $m[0]), $g['goal']),
                   goal_cell($goalStates[$i])];
}
// The PHP versions' rounds: one column each.
$versionsTable = '';
if (is_array($versions) && $versions !== []) {
    $vrows = [];
    foreach ($versions as $v => $d) {
        $xs = $d['calls_per_s'] ?? [];
        $vrows[] = ["PHP " . ($d['php'] ?? $v), 'shm', '2048 B', 'never', (string)count($xs),
            $xs === [] ? '-' : fmt_int(median($xs)), $xs === [] ? '-' : fmt_int(min($xs)) . ' – ' . fmt_int(max($xs))];
    }
    $versionsTable = "\nPHP versions against the same daemon, alternating rounds (bench/scenario/run.sh --php):\n\n"
        . table(['PHP', 'transport', 'size', 'reconnect', 'rounds', 'calls/s (median)', 'range'], $vrows, [4, 5, 6]);
}
$goalTable = table(['check', 'value', 'goal', 'result'], $goalRows, [1, 2]) . "\n" . goals_line($goalsSummary) . "\n";

$cpu = preg_match('/^model name\s*:\s*(.+)$/m', (string)@file_get_contents('/proc/cpuinfo'), $m) ? $m[1] : php_uname('m');
$meta = [
    'date' => gmdate('Y-m-d H:i:s') . ' UTC',
    'machine' => sprintf('%s, %d CPUs, %s %s', $cpu, preg_match_all('/^processor\s*:/m', (string)@file_get_contents('/proc/cpuinfo')),
        php_uname('s'), php_uname('r')),
    'cpus_allowed' => preg_match('/^Cpus_allowed_list:\s*(\S+)/m', (string)@file_get_contents('/proc/self/status'), $m) ? $m[1] : '?',
    'server' => $opt['server'],
    'php' => PHP_VERSION,
    'requests' => $n,
    'reply' => $opt['reply'],
    'raw_reply' => $opt['raw_reply'],
    'wait' => $opt['wait'] ?? 'default (spin)',
    'addresses' => $opt['transports'] + array_combine(array_map(fn ($k) => "raw-$k", array_keys($opt['raw'])), $opt['raw'])
        + $opt['pools'],
];
$rustLine = $opt['rust_bin'] === null ? null : ($rust === null ? 'Rust client: not measured'
    : sprintf('Rust client (shmlink bench --connect, shm %s 64 B): p50 %s µs, p99 %s µs, %s calls/s',
        $rust['wait'] ?? '', fmt_us($rust['p50_us']), fmt_us($rust['p99_us']), fmt_int($rust['calls_per_s'])));
$md = "# PHP client benchmark\n\n"
    . "- date: {$meta['date']}\n- machine: {$meta['machine']}\n"
    . ($meta['server'] !== null ? "- server: {$meta['server']}\n" : '')
    . "- PHP {$meta['php']}, client wait {$meta['wait']}, on CPU(s) {$meta['cpus_allowed']}" . ($opt['rust_bin'] !== null ? ' (the Rust client too)' : '') . "\n"
    . "- each point: $n calls with $n distinct payloads made before the clock starts; every response checked"
    . " (shmlink: {$opt['reply']}(S/8) bytes, raw: {$opt['raw_reply']}(S/8) bytes)\n"
    . "- reconnect: never = one connection; every M = a new non-persistent client every M calls"
    . " (that call's latency includes the close and the connect)\n"
    . "- raw = PHP's sockets extension, 4-byte little-endian length framing, to the same server's raw listener\n"
    . ($opt['redis'] !== null ? "- redis broker = phpredis RPUSH of the request and BLPOP of the reply through redis-server"
        . " on loopback, bench/redis/worker.php (PHP) doing the daemon's work in between\n" : '')
    . ($opt['pools'] !== [] ? "- pool = `shmlink pool` over shm with PHP workers (bench/pool/worker.php, OPcache on) answering"
        . " floor(S/8) bytes as the daemon does: the same client, through the pool's dispatch to a PHP worker\n" : '')
    . "- p50 ÷ shm and shm calls/s ÷ this: against shmlink shm at the same size and reconnect mode\n"
    . ($rustLine !== null ? "- $rustLine\n" : '')
    . implode('', array_map(fn ($s) => "- note: $s\n", $notes))
    . "\n## Results\n\n$results$versionsTable\n## Goals\n\n$goalTable";

echo "\n$results$versionsTable\n", $rustLine !== null ? "$rustLine\n" : '', implode('', array_map(fn ($s) => "note: $s\n", $notes)), "\n$goalTable";
if ($opt['json'] !== null) {
    $doc = ['meta' => $meta, 'points' => $points, 'rust' => $rust, 'goals' => $goals, 'goals_summary' => $goalsSummary,
            'notes' => $notes, 'failures' => $failures, 'versions' => $versions];
    file_put_contents($opt['json'], json_encode($doc, JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE) . "\n");
}
if ($opt['markdown'] !== null) {
    file_put_contents($opt['markdown'], $md);
}
if ($failures !== []) {
    fwrite(STDERR, "bench.php: " . count($failures) . " point(s) failed:\n  " . implode("\n  ", $failures) . "\n");
    exit(1);
}
