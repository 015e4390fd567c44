<?php
/* PHP's async row of bench/async/run.sh: at 64 B against one server, one
 * call at a time through stream_select() on Client::stream() (send, then
 * tryReceive until it answers, waiting on the stream between) beside the
 * blocking call() with the sleep wait, CPU per call for each, and
 * pipelined calls kept 256 in flight from one process. Prints one JSON line.
 *
 *   php -d extension=bindings/php/modules/shmlink.so bench/async/php.php ADDRESS [CALLS] */

declare(strict_types=1);

$address = $argv[1] ?? exit("usage: php.php ADDRESS [CALLS]\n");
$calls = (int)($argv[2] ?? 20000);
$req = str_repeat('x', 64);

function cpu_ns(): int
{
    $r = getrusage();
    return ($r['ru_utime.tv_sec'] + $r['ru_stime.tv_sec']) * 1_000_000_000
        + ($r['ru_utime.tv_usec'] + $r['ru_stime.tv_usec']) * 1000;
}

function p50(array $v): int
{
    sort($v);
    return $v[intdiv(count($v), 2)];
}

/* One call through the loop. */
function loop_call(Shmlink\Client $c, $stream, string $req): string
{
    $c->send($req);
    for (;;) {
        $a = $c->tryReceive();
        if ($a !== null) {
            return $a[1];
        }
        $r = [$stream];
        $w = $e = null;
        if (stream_select($r, $w, $e, 10) !== 1) {
            throw new RuntimeException('no answer in 10 s');
        }
    }
}

$blocking = new Shmlink\Client($address, ['wait' => 'sleep']);
$looped = new Shmlink\Client($address);
$stream = $looped->stream();

$ways = ['blocking' => fn() => $blocking->call($req), 'loop' => fn() => loop_call($looped, $stream, $req)];
foreach ($ways as $call) {
    for ($i = 0; $i < intdiv($calls, 20); $i++) {
        $call();
    }
}
/* The two ways alternate in rounds of 500 calls (this VM moves its vCPUs
 * every few seconds: ways measured apart do not compare). */
$lat = ['blocking' => [], 'loop' => []];
$cpu = ['blocking' => 0, 'loop' => 0];
for ($done = 0; $done < $calls; $done += $n) {
    $n = min(500, $calls - $done);
    foreach ($ways as $name => $call) {
        $c0 = cpu_ns();
        for ($i = 0; $i < $n; $i++) {
            $t = hrtime(true);
            $call();
            $lat[$name][] = hrtime(true) - $t;
        }
        $cpu[$name] += cpu_ns() - $c0;
    }
}
$result = [];
foreach ($ways as $name => $call) {
    $result[$name] = [p50($lat[$name]), intdiv($cpu[$name], $calls)];
}

/* Pipelined through the loop: 256 in flight. */
$total = $calls * 5;
$sent = $got = 0;
$t = hrtime(true);
$c0 = cpu_ns();
while ($got < $total) {
    while ($sent < $total && $sent - $got < 256) {
        $looped->send($req);
        $sent++;
    }
    while (($a = $looped->tryReceive()) !== null) {
        $got++;
    }
    if ($got < $total && $sent > $got) {
        $r = [$stream];
        $w = $e = null;
        stream_select($r, $w, $e, 10);
    }
}
$secs = (hrtime(true) - $t) / 1e9;
$pipe_cpu = intdiv(cpu_ns() - $c0, $total);

printf(
    "{\"size\":64,\"calls\":%d,\"blocking_sleep_p50_ns\":%d,\"blocking_sleep_cpu_ns\":%d,"
    . "\"async_p50_ns\":%d,\"async_cpu_ns\":%d,\"pipelined_calls_per_s\":%.0f,\"pipelined_cpu_ns\":%d}\n",
    $calls,
    $result['blocking'][0],
    $result['blocking'][1],
    $result['loop'][0],
    $result['loop'][1],
    $total / $secs,
    $pipe_cpu
);
