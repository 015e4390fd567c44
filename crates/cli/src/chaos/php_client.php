<?php
/* A PHP client process of `shmlink chaos --php-clients N` (the CLI writes
 * this file into its run directory and starts it with the extension):
 * the PHP twin of `shmlink __chaos-client`. It connects (persistent or
 * not), makes a random number of calls (single, pipelined bursts, one-way)
 * with random sizes, checks every reply, reconnects, and so on until
 * killed. Requests use the chaos wire format (crates/cli/src/chaos/wire.rs):
 * magic "SHKC", client id, sequence number, FNV-1a 64 of the payload, all
 * little-endian, then the payload; the echo server returns it whole.
 * Counters go to stdout as one JSON line every 100 ms, and at once when a
 * reply is wrong.
 *
 *   php -n -d extension=shmlink.so client.php ADDRESS ID SEED TIMEOUT_MS MAX_SIZE */

declare(strict_types=1);

const MAGIC = 0x5348_4b43;
const HEADER = 24;

[, $address, $id, $seed, $timeoutMs, $maxSize] = $argv + array_fill(0, 6, null);
if ($maxSize === null) {
    fwrite(STDERR, "usage: php client.php ADDRESS ID SEED TIMEOUT_MS MAX_SIZE\n");
    exit(2);
}
[$id, $timeout, $maxSize] = [(int)$id, (int)$timeoutMs / 1000, (int)$maxSize];
mt_srand((int)$seed);

$c = ['made' => 0, 'completed' => 0, 'failed' => [], 'hung' => 0, 'wrong' => 0, 'one_way' => 0,
      'sessions' => 0, 'connect_failures' => 0, 'first_wrong' => null];
$lastReport = 0.0;
$seq = 0;

function report(array $c, bool $now, float &$last): void
{
    $t = microtime(true);
    if (!$now && $t - $last < 0.1) {
        return;
    }
    $last = $t;
    $c['failed'] = (object)$c['failed'];
    echo json_encode($c), "\n";
}

/** The short name of an error's kind, as the Rust client counts them. */
function kind(Throwable $e): string
{
    return match (true) {
        $e instanceof Shmlink\TimeoutException => 'timeout',
        $e instanceof Shmlink\ClosedException => 'peer gone',
        $e instanceof Shmlink\ConnectException => 'connect',
        $e instanceof Shmlink\RemoteException => 'remote',
        $e instanceof Shmlink\ProtocolException => 'protocol',
        default => 'other',
    };
}

/** A payload size: mostly small, log-uniform, sometimes megabytes. */
function size(int $max): int
{
    if (mt_rand(0, 99) < 2) {
        return mt_rand(1 << 20, max(1 << 20, $max));
    }
    return mt_rand(0, 1 << mt_rand(0, 17));
}

function request(int $client, int $seq, int $len): string
{
    $payload = $len > 0 ? random_bytes($len) : '';
    return pack('VVP', MAGIC, $client, $seq) . strrev(hash('fnv1a64', $payload, true)) . $payload;
}

/** null when $reply is $request back, else what is wrong with it. */
function verdict(string $request, string $reply): ?string
{
    if ($reply === $request) {
        return null;
    }
    if (strlen($reply) >= HEADER) {
        $h = unpack('Vmagic/Vclient/Pseq', $reply);
        $sum = strrev(hash('fnv1a64', substr($reply, HEADER), true));
        if ($h['magic'] === MAGIC && $sum === substr($reply, 16, 8) && substr($reply, 4, 12) !== substr($request, 4, 12)) {
            return "OtherCall({$h['client']}, {$h['seq']})";
        }
    }
    return sprintf('Damaged("%d bytes back for a request of %d bytes")', strlen($reply), strlen($request));
}

/** Counts $n failed calls; returns whether the session is still usable. */
function failed(array &$c, Shmlink\Client $client, Throwable $e, float $took, float $timeout, int $n = 1): bool
{
    $k = kind($e);
    $c['failed'][$k] = ($c['failed'][$k] ?? 0) + $n;
    if ($took > $timeout + 1.0) {
        $c['hung'] += $n;
    }
    return $client->isConnected();
}

function judge(array &$c, string $request, string $reply, float &$last): void
{
    $v = verdict($request, $reply);
    if ($v === null) {
        $c['completed']++;
        return;
    }
    $c['wrong']++;
    $c['first_wrong'] ??= "PHP client: $v";
    report($c, true, $last);
}

while (true) {
    $options = ['timeout' => $timeout, 'persistent' => mt_rand(0, 1) === 1,
                'wait' => ['sleep', 'spin', 'busy'][mt_rand(0, 2)],
                'ring_size' => [16 << 10, 64 << 10, 1 << 20][mt_rand(0, 2)]];
    try {
        $client = new Shmlink\Client($address, $options);
    } catch (Shmlink\Exception $e) {
        $c['connect_failures']++;
        usleep(5000); // pacing while the server restarts, not a wait for a condition
        report($c, false, $lastReport);
        continue;
    }
    $c['sessions']++;
    for ($n = mt_rand(1, 299); $n > 0; $n--) {
        $roll = mt_rand(0, 99);
        $alive = true;
        if ($roll < 80) {
            $req = request($id, ++$seq, size($maxSize));
            $c['made']++;
            $t0 = microtime(true);
            try {
                judge($c, $req, $client->call($req), $lastReport);
            } catch (Shmlink\Exception $e) {
                $alive = failed($c, $client, $e, microtime(true) - $t0, $timeout);
            }
        } elseif ($roll < 95) {
            $sent = [];
            $t0 = microtime(true);
            try {
                for ($k = mt_rand(2, 16); $k > 0; $k--) {
                    $req = request($id, ++$seq, size($maxSize));
                    $c['made']++;
                    $sent[$client->send($req)] = $req;
                }
            } catch (Shmlink\Exception $e) {
                // This call and those sent before it fail with the session.
                failed($c, $client, $e, microtime(true) - $t0, $timeout, count($sent) + 1);
                $alive = false;
                $sent = [];
            }
            while ($sent !== []) {
                $t0 = microtime(true);
                $got = null;
                try {
                    $reply = $client->receive($got);
                } catch (Shmlink\RemoteException $e) {
                    // An error answer to one call ($got is its id).
                    failed($c, $client, $e, microtime(true) - $t0, $timeout);
                    unset($sent[$got]);
                    continue;
                } catch (Shmlink\Exception $e) {
                    failed($c, $client, $e, microtime(true) - $t0, $timeout, count($sent));
                    $alive = false;
                    break;
                }
                if (!isset($sent[$got])) {
                    $c['wrong']++;
                    $c['first_wrong'] ??= "PHP client: a reply for call $got which was not sent";
                    report($c, true, $lastReport);
                    continue;
                }
                judge($c, $sent[$got], $reply, $lastReport);
                unset($sent[$got]);
            }
        } else {
            try {
                $client->notify(request($id, ++$seq, size($maxSize)));
                $c['one_way']++;
            } catch (Shmlink\Exception $e) {
                $alive = $client->isConnected();
            }
        }
        report($c, false, $lastReport);
        if (!$alive) {
            break;
        }
    }
    $client->close();
    $client = null;
}
