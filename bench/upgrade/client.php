<?php
/* A client of the pool's hot-upgrade benchmark: calls ADDRESS without
 * pause over one persistent session, checks every answer, and counts the
 * calls in 10 ms windows of the monotonic clock (the one hrtime() reads,
 * the same in every process). A call that fails is counted, and the client
 * connects again (a reconnect). Stops when STOP_FILE exists; writes what it
 * saw to OUT_JSON.
 *
 *   php client.php ADDRESS SIZE STOP_FILE OUT_JSON */

declare(strict_types=1);

[, $address, $size, $stopFile, $out] = $argv + [null, null, null, null, null];
if ($out === null) {
    fwrite(STDERR, "usage: php client.php ADDRESS SIZE STOP_FILE OUT_JSON\n");
    exit(2);
}
$size = (int)$size;
$options = ['timeout' => 10.0];
$client = new Shmlink\Client($address, $options);
$windows = [];
$calls = $failed = $reconnects = 0;
$firstFailure = null;
for ($i = 0; ; $i++) {
    if (($i & 255) === 0 && file_exists($stopFile)) {
        break;
    }
    $request = str_pad((string)$i, $size, '.');
    try {
        $answer = $client->call($request);
        if ($answer !== $request) {
            throw new RuntimeException('a wrong answer of ' . strlen($answer) . ' bytes');
        }
        $calls++;
        $w = intdiv(hrtime(true), 10_000_000);
        $windows[$w] = ($windows[$w] ?? 0) + 1;
    } catch (Throwable $e) {
        $failed++;
        $firstFailure ??= $e->getMessage();
        $deadline = hrtime(true) + 10_000_000_000;
        for (;;) {
            try {
                $client = new Shmlink\Client($address, $options);
                $reconnects++;
                break;
            } catch (Throwable $e) {
                if (hrtime(true) > $deadline) {
                    fwrite(STDERR, "client.php: reconnecting to $address: {$e->getMessage()}\n");
                    exit(1);
                }
            }
        }
    }
}
file_put_contents($out, json_encode([
    'address' => $address,
    'calls' => $calls,
    'failed' => $failed,
    'reconnects' => $reconnects,
    'first_failure' => $firstFailure,
    'windows' => $windows,
]));
