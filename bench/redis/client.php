<?php
// The Redis broker baseline's client: N calls of S bytes through Redis
// (RPUSH the request, BLPOP the reply), reconnecting every M calls (0: one
// connection). Payloads are made before timing starts; every reply is
// checked. Prints one JSON object per case.
//
//   php client.php HOST PORT N SIZES RECONNECTS     e.g. ... 20000 2048,128 0,10,1

declare(strict_types=1);

[$host, $port, $n] = [$argv[1], (int) $argv[2], (int) $argv[3]];
$sizes = array_map('intval', explode(',', $argv[4] ?? '2048,128'));
$modes = array_map('intval', explode(',', $argv[5] ?? '0,10,1'));

function connect_redis(string $host, int $port): Redis {
    $r = new Redis();
    $r->connect($host, $port, 2.0);
    return $r;
}

foreach ($sizes as $size) {
    $payloads = [];
    for ($i = 0; $i < min($n, 1000); $i++) {
        $payloads[] = random_bytes($size);
    }
    foreach ($modes as $every) {
        $key = 'shmlink:rep:' . getmypid() . ":$size:$every";
        $header = pack('n', strlen($key)) . $key;
        $lat = [];
        $redis = connect_redis($host, $port);
        $t0 = hrtime(true);
        for ($i = 0; $i < $n; $i++) {
            if ($every > 0 && $i > 0 && $i % $every === 0) {
                $redis->close();
                $redis = connect_redis($host, $port);
            }
            $p = $payloads[$i % count($payloads)];
            $c0 = hrtime(true);
            $redis->rPush('shmlink:req', $header . $p);
            $reply = $redis->blPop([$key], 2);
            $lat[] = hrtime(true) - $c0;
            if (!$reply || $reply[1] !== substr($p, 0, intdiv($size, 8))) {
                fwrite(STDERR, "redis: wrong or missing reply to call $i\n");
                exit(1);
            }
        }
        $total = (hrtime(true) - $t0) / 1e9;
        $redis->close();
        sort($lat);
        $q = fn(float $x) => $lat[(int) floor(($n - 1) * $x)] / 1e3;
        echo json_encode([
            'transport' => 'redis', 'size' => $size, 'reconnect_every' => $every, 'calls' => $n,
            'calls_per_s' => $n / $total, 'p50_us' => $q(0.5), 'p99_us' => $q(0.99),
        ]), "\n";
    }
}
