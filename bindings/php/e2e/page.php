<?php
/* The page of the php-fpm + nginx end-to-end test (ci/php-e2e.sh).
 *
 * GET page.php?t=shm|unix|tcp: 20 calls through a persistent Shmlink\Client
 * to the `shmlink echo` server whose address php-fpm passes in the
 * environment (SHMLINK_E2E_SHM, SHMLINK_E2E_UNIX, SHMLINK_E2E_TCP). The
 * server answers each request with its first ceil(len / 8) bytes; every
 * response is checked. The body is one JSON object:
 *   {"transport", "pid", "start", "calls", "ok", "failures": [...], "stats": {...}}
 * where "start" is the worker's start time (clock ticks since boot, from
 * /proc/self/stat) so that a reused pid is not mistaken for the same
 * worker, and "stats" is Shmlink\stats() after the calls. */

declare(strict_types=1);

const E2E_CALLS = 20;

header('Content-Type: application/json');

/** The start time of this process in clock ticks since boot (0 if unknown). */
function process_start(): int
{
    $stat = @file_get_contents('/proc/self/stat');
    if ($stat === false) {
        return 0;
    }
    // Fields after the command name, which is in parentheses and may hold spaces.
    $fields = explode(' ', substr($stat, strrpos($stat, ')') + 2));
    return (int)($fields[19] ?? 0); // field 22 of proc(5)
}

/** Request sizes: the edges of ceil(len / 8) and of a 64 KiB ring, then random ones. */
function request_sizes(): array
{
    $sizes = [0, 1, 7, 8, 9, 64, 2048, 65536, 100000];
    while (count($sizes) < E2E_CALLS) {
        $sizes[] = random_int(1, 8192);
    }
    shuffle($sizes);
    return $sizes;
}

$transport = (string)($_GET['t'] ?? '');
$envs = ['shm' => 'SHMLINK_E2E_SHM', 'unix' => 'SHMLINK_E2E_UNIX', 'tcp' => 'SHMLINK_E2E_TCP'];
$ok = 0;
$failures = [];
$address = isset($envs[$transport]) ? getenv($envs[$transport]) : false;
if (!is_string($address) || $address === '') {
    http_response_code(400);
    $failures[] = "unknown transport or no address: t=$transport";
} else {
    try {
        $client = new Shmlink\Client($address, ['persistent' => true, 'timeout' => 5.0]);
        foreach (request_sizes() as $i => $len) {
            $request = $len === 0 ? '' : random_bytes($len);
            try {
                $response = $client->call($request);
                if ($response === substr($request, 0, intdiv($len + 7, 8))) {
                    $ok++;
                } else {
                    $failures[] = sprintf('call %d (%d B): wrong response of %d B', $i, $len, strlen($response));
                }
            } catch (Shmlink\Exception $e) {
                $failures[] = sprintf('call %d (%d B): %s: %s', $i, $len, get_class($e), $e->getMessage());
            }
        }
    } catch (Shmlink\Exception $e) {
        $failures[] = sprintf('new Client(%s): %s: %s', $address, get_class($e), $e->getMessage());
    }
}

echo json_encode([
    'transport' => $transport,
    'pid' => getmypid(),
    'start' => process_start(),
    'calls' => E2E_CALLS,
    'ok' => $ok,
    'failures' => $failures,
    'stats' => Shmlink\stats(),
], JSON_UNESCAPED_SLASHES | JSON_THROW_ON_ERROR), "\n";
