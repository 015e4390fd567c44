<?php
/* The pool's hot upgrade under load (issue 38): `shmlink pool --http` with
 * PHP workers, a PHP client calling without pause over one persistent shm:
 * session, a second over unix:, and wrk -c16 on the HTTP front, while the
 * pool is upgraded N times (SIGUSR2: it starts its binary again, which
 * takes everything over, and the old process exits). Calls are counted in
 * 10 ms windows of the monotonic clock; the worst window overlapping an
 * upgrade is set against the steady rate, and beside it the bound: the
 * worst window while a second pool (its own PHP workers) starts and stops
 * next to the load, touching none of it.
 *
 *   php bench/upgrade/pool.php [--upgrades N] [--gap-ms MS] [--size BYTES]
 *                              [--markdown FILE] [--json FILE] [--check]
 *
 * --check: exit 1 unless every upgrade happened with no failed shm: call,
 * no wrong answer, no HTTP error (the figures themselves are not checked:
 * ci/test.sh runs it short on a busy machine).
 * Needs target/release/shmlink, the PHP extension (bindings/php/modules),
 * wrk. It runs in a scope of its own (bench/common/scope.php): everything
 * it starts is stopped on every way out. */

declare(strict_types=1);

$root = dirname(__DIR__, 2);
$opt = ['upgrades' => 10, 'gap-ms' => 400, 'size' => 2048, 'markdown' => null, 'json' => null];
$check = false;
for ($i = 1; $i < $argc; $i++) {
    if ($argv[$i] === '--check') {
        $check = true;
        continue;
    }
    $name = ltrim($argv[$i], '-');
    if (!array_key_exists($name, $opt) || !isset($argv[$i + 1])) {
        fwrite(STDERR, "usage: php bench/upgrade/pool.php [--upgrades N] [--gap-ms MS] [--size BYTES] [--markdown FILE] [--json FILE] [--check]\n");
        exit(2);
    }
    $opt[$name] = $argv[++$i];
}
[$upgrades, $gapMs, $size] = [(int)$opt['upgrades'], (int)$opt['gap-ms'], (int)$opt['size']];
$shmlink = getenv('SHMLINK_BIN') ?: "$root/target/release/shmlink";
$ext = getenv('SHMLINK_EXT') ?: "$root/bindings/php/modules/shmlink.so";
foreach ([$shmlink, $ext] as $f) {
    if (!is_file($f)) {
        fwrite(STDERR, "pool.php: $f is missing (build it: ci/main.sh builds everything)\n");
        exit(1);
    }
}
require "$root/bench/common/scope.php";
shmlink_scope($shmlink);
$php = [PHP_BINARY, '-n', '-d', "extension=$ext", '-d', 'opcache.enable_cli=1'];
$dir = sys_get_temp_dir() . '/shmlink-pool-upgrade-' . getmypid();
@mkdir($dir, 0700, true);
$procs = [];
$pids = [];

function now(): int { return hrtime(true); }

function free_port(): int
{
    $s = socket_create(AF_INET, SOCK_STREAM, SOL_TCP);
    socket_bind($s, '127.0.0.1', 0);
    socket_getsockname($s, $addr, $port);
    socket_close($s);
    return $port;
}

/** Whether process $pid has exited (gone, or a zombie nobody reaped yet). */
function exited(int $pid): bool
{
    $stat = @file_get_contents("/proc/$pid/stat");
    if ($stat === false) {
        return true;
    }
    return substr($stat, strrpos($stat, ')') + 2, 1) === 'Z';
}

function wait_until(string $what, float $seconds, callable $cond): void
{
    $deadline = now() + (int)($seconds * 1e9);
    while (!$cond()) {
        if (now() > $deadline) {
            throw new RuntimeException("pool.php: $what did not happen within {$seconds} s");
        }
        usleep(200);
    }
}

function start(array $cmd, string $log): array
{
    $p = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'a'], 2 => ['file', $log, 'a']], $pipes);
    if (!is_resource($p)) {
        throw new RuntimeException('pool.php: cannot start ' . implode(' ', $cmd));
    }
    return [$p, proc_get_status($p)['pid']];
}

function pool_cmd(string $shmlink, array $php, string $root, array $listen, int $workers): array
{
    $cmd = [$shmlink, 'pool', '--workers', (string)$workers];
    foreach ($listen as $l) {
        array_push($cmd, ...$l);
    }
    return [...$cmd, '--', ...$php, "$root/bench/upgrade/worker.php"];
}

$cleanup = function () use (&$procs, &$pids, $dir) {
    foreach ($pids as $pid) {
        if (!exited($pid)) {
            posix_kill($pid, SIGKILL);
        }
    }
    foreach ($procs as $p) {
        @proc_terminate($p, SIGKILL);
        @proc_close($p);
    }
    foreach (glob("$dir/*") ?: [] as $f) {
        @unlink($f);
    }
    @rmdir($dir);
};
register_shutdown_function($cleanup);

$port = free_port();
$log = "$dir/pool.log";
[$procs[], $pid] = start(pool_cmd($shmlink, $php, $root, [
    ['--listen', "shm:$dir/a.sock"], ['--listen', "unix:$dir/u.sock"],
    ['--http', "127.0.0.1:$port"], ['--http-mode', 'front'],
], 2), $log);
$pids[] = $pid;
wait_until('the pool being ready', 30, fn () => str_contains((string)@file_get_contents($log), 'ready, listening'));
$stop = "$dir/stop";
$clients = [];
foreach (['shm' => "shm:$dir/a.sock", 'unix' => "unix:$dir/u.sock"] as $kind => $address) {
    [$procs[], $clients[$kind]] = start([...$php, "$root/bench/upgrade/client.php", $address, (string)$size, $stop, "$dir/$kind.json"], "$dir/client-$kind.log");
}
// wrk runs through every upgrade: the steady part, then per upgrade a
// bystander, the upgrade and their gaps (an upgrade and a bystander take
// well under a second each here).
$wrkSeconds = (int)ceil((2 * $gapMs + $upgrades * (2 * $gapMs + 1500)) / 1000) + 1;
[$procs[], $wrk] = start(['wrk', '-t2', '-c16', "-d{$wrkSeconds}s", "http://127.0.0.1:$port/"], "$dir/wrk.txt");
$t0 = now();
usleep(2 * $gapMs * 1000);
$spans = $bounds = $times = $served = [];
for ($n = 1; $n <= $upgrades; $n++) {
    // The bound: a second pool with its own PHP workers, started and
    // stopped beside the load.
    $blog = "$dir/bystander-$n.log";
    $a = now();
    [$bp, $bpid] = start(pool_cmd($shmlink, $php, $root, [['--listen', "shm:$dir/b-$n.sock"]], 2), $blog);
    $procs[] = $bp;
    wait_until('a bystander pool being ready', 30, fn () => substr_count((string)@file_get_contents($blog), ' ready') >= 3);
    posix_kill($bpid, SIGTERM);
    wait_until('a bystander pool exiting', 30, fn () => !proc_get_status($bp)['running']);
    $bounds[] = [$a, now()];
    usleep($gapMs * 1000);
    // The upgrade: from the signal to the old process's exit.
    $old = $pid;
    $a = now();
    posix_kill($old, SIGUSR2);
    wait_until("pool pid $old exiting after SIGUSR2", 60, fn () => exited($old));
    $b = now();
    $spans[] = [$a, $b];
    $times[] = ($b - $a) / 1e6;
    preg_match_all('/successor pid (\d+) serves \(([0-9.]+) ms/', (string)file_get_contents($log), $m);
    $pid = (int)end($m[1]);
    $served[] = (float)end($m[2]);
    if ($pid === $old || exited($pid)) {
        throw new RuntimeException("pool.php: upgrade $n: no successor serves after pid $old exited; log:\n" . file_get_contents($log));
    }
    $pids[] = $pid;
    usleep($gapMs * 1000);
}
wait_until('wrk finishing', $wrkSeconds + 30, fn () => exited($wrk));
touch($stop);
foreach ($clients as $kind => $cpid) {
    wait_until("the $kind client finishing", 30, fn () => is_file("$dir/$kind.json"));
}
posix_kill($pid, SIGTERM);
wait_until("the last pool (pid $pid) stopping", 30, fn () => exited($pid));

// The figures.
$seen = [];
$windows = [];
foreach (array_keys($clients) as $kind) {
    $seen[$kind] = json_decode((string)file_get_contents("$dir/$kind.json"), true, flags: JSON_THROW_ON_ERROR);
    foreach ($seen[$kind]['windows'] as $w => $c) {
        $windows[$w] = ($windows[$w] ?? 0) + $c;
    }
}
$win = fn (int $ns) => intdiv($ns, 10_000_000);
[$first, $last] = [$win($t0) + 20, $win(end($spans)[1]) + 20];
$overlaps = function (int $w, array $spans) use ($win): bool {
    foreach ($spans as [$a, $b]) {
        if ($w >= $win($a) - 1 && $w <= $win($b) + 1) {
            return true;
        }
    }
    return false;
};
$steady = [];
$worst = $bound = PHP_INT_MAX;
for ($w = $first; $w <= $last; $w++) {
    $c = $windows[$w] ?? 0;
    $in = $overlaps($w, $spans);
    $by = $overlaps($w, $bounds);
    if ($in) {
        $worst = min($worst, $c);
    }
    if ($by) {
        $bound = min($bound, $c);
    }
    if (!$in && !$by) {
        $steady[] = $c;
    }
}
sort($steady);
$steadyRate = $steady[intdiv(count($steady), 2)] ?? 0;
$ratio = fn (int $c) => $steadyRate > 0 ? $c / $steadyRate : 0.0;
$wrkOut = (string)file_get_contents("$dir/wrk.txt");
preg_match('/(\d+) requests in/', $wrkOut, $m);
$requests = (int)($m[1] ?? 0);
$socketErrors = 0;
if (preg_match('/Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/', $wrkOut, $m)) {
    $socketErrors = (int)$m[1] + (int)$m[2] + (int)$m[3] + (int)$m[4];
}
$non2xx = preg_match('/Non-2xx or 3xx responses: (\d+)/', $wrkOut, $m) ? (int)$m[1] : 0;
sort($times);
$p50 = $times[intdiv(count($times), 2)];
$max = end($times);
sort($served);
$md = "## The pool's hot upgrade under load\n\n"
    . "`php bench/upgrade/pool.php --upgrades $upgrades`: `shmlink pool --http --http-mode front` with 2 PHP workers, "
    . "a PHP client calling without pause over one persistent `shm:` session and a second over `unix:` ($size-byte calls, "
    . "every answer checked), and `wrk -t2 -c16` on the HTTP front, while the pool is upgraded $upgrades times (SIGUSR2: "
    . "the new process starts its own PHP workers, waits until they serve, takes over the listeners and the `shm:` sessions; "
    . "the old one stops; workers are restarted, not kept). Calls counted in 10 ms windows.\n\n"
    . "| figure | value |\n|---|---|\n"
    . sprintf("| upgrades | %d |\n", count($times))
    . sprintf("| upgrade time, SIGUSR2 to the old process's exit: p50 / max | %.1f / %.1f ms |\n", $p50, $max)
    . sprintf("| of which the successor's start until it serves (its workers booted, everything taken over): p50 | %.1f ms |\n", $served[intdiv(count($served), 2)])
    . sprintf("| calls per 10 ms window, steady (median) | %d |\n", $steadyRate)
    . sprintf("| worst window during an upgrade | %d (%.2fx steady) |\n", $worst, $ratio($worst))
    . sprintf("| the bound: worst window while a second pool with its PHP workers starts and stops beside | %d (%.2fx steady) |\n", $bound, $ratio($bound));
foreach ($seen as $kind => $s) {
    $md .= sprintf("| PHP client over %s: calls / failed / reconnects | %d / %d / %d |\n", $kind, $s['calls'], $s['failed'], $s['reconnects']);
}
$md .= sprintf("| HTTP (wrk -c16): requests / socket errors / non-2xx | %d / %d / %d |\n", $requests, $socketErrors, $non2xx);
foreach ($seen as $kind => $s) {
    if ($s['first_failure'] !== null) {
        $md .= "\nFirst failure over $kind: {$s['first_failure']}\n";
    }
}
print $md;
if ($opt['markdown'] !== null) {
    file_put_contents($opt['markdown'], $md);
}
if ($opt['json'] !== null) {
    file_put_contents($opt['json'], json_encode([
        'upgrades' => count($times),
        'upgrade_ms' => $times,
        'successor_serves_ms' => $served,
        'steady_calls_per_window' => $steadyRate,
        'worst_window_during_upgrade' => $worst,
        'worst_ratio' => $ratio($worst),
        'bound_worst_window' => $bound,
        'bound_ratio' => $ratio($bound),
        'clients' => array_map(fn ($s) => array_diff_key($s, ['windows' => 0]), $seen),
        'http' => ['requests' => $requests, 'socket_errors' => $socketErrors, 'non_2xx' => $non2xx],
    ], JSON_PRETTY_PRINT) . "\n");
}
if ($check) {
    $wrong = array_filter($seen, fn ($s) => $s['first_failure'] !== null && str_contains($s['first_failure'], 'wrong answer'));
    $problems = [];
    if (count($times) !== $upgrades) {
        $problems[] = count($times) . " upgrades of $upgrades";
    }
    if ($seen['shm']['failed'] !== 0 || $seen['shm']['reconnects'] !== 0) {
        $problems[] = "shm: {$seen['shm']['failed']} failed calls, {$seen['shm']['reconnects']} reconnects";
    }
    if ($wrong) {
        $problems[] = 'a wrong answer';
    }
    if ($socketErrors + $non2xx > 0 || $requests === 0) {
        $problems[] = "HTTP: $requests requests, $socketErrors socket errors, $non2xx non-2xx";
    }
    if ($problems) {
        fwrite(STDERR, 'pool.php --check: ' . implode('; ', $problems) . "\n");
        exit(1);
    }
}
