<?php
// The Redis broker baseline's worker: what users build when they put Redis
// between a PHP client and a service. It pops requests from the list
// `shmlink:req`, does the daemon's work (counts byte frequencies, replies
// with the first floor(len/8) bytes) and pushes the reply onto the list the
// request names.
//
//   php worker.php HOST PORT
//
// A request is: 2-byte big-endian length of the reply list's name, the name,
// then the payload. Stops on SIGTERM (checked between requests).

declare(strict_types=1);

[$host, $port] = [$argv[1] ?? '127.0.0.1', (int) ($argv[2] ?? 6379)];
$stop = false;
pcntl_async_signals(true);
pcntl_signal(SIGTERM, function () use (&$stop) { $stop = true; });

$redis = new Redis();
$redis->connect($host, $port);
$redis->setOption(Redis::OPT_READ_TIMEOUT, -1);
fwrite(STDOUT, "ready\n");
while (!$stop) {
    $item = $redis->blPop(['shmlink:req'], 1);
    if (!$item) {
        continue;
    }
    $msg = $item[1];
    $n = unpack('n', $msg)[1];
    $key = substr($msg, 2, $n);
    $payload = substr($msg, 2 + $n);
    count_chars($payload, 1); // the daemon's work: byte frequencies
    $redis->rPush($key, substr($payload, 0, intdiv(strlen($payload), 8)));
}
