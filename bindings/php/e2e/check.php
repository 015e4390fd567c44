<?php
/* Checks the responses collected by ci/php-e2e.sh.
 *
 *   php check.php DIR EXPECTED CHILDREN MAX_REQUESTS
 *
 * DIR holds *.status files, one line per request written by curl's
 * --write-out: "HTTP_CODE URL BODY_FILE". Every one of the EXPECTED requests
 * must be HTTP 200 with all calls ok. The Shmlink\stats() of each request
 * are then replayed per worker (pid + start time), in the order of the
 * worker's cumulative call count, which grows by exactly one page's calls
 * per request: a worker connects once per transport it meets, and every
 * later request on that transport reuses the session (no reconnect, no
 * error). php-fpm must have recycled workers: more of them than CHILDREN,
 * none serving more than MAX_REQUESTS.
 *
 * Prints one line of figures; any failure goes to stderr and
 * makes the exit status 1. */

declare(strict_types=1);

if ($argc !== 5) {
    fwrite(STDERR, "usage: php check.php DIR EXPECTED CHILDREN MAX_REQUESTS\n");
    exit(2);
}
[, $dir, $expected, $children, $maxRequests] = $argv;
$expected = (int)$expected;
$children = (int)$children;
$maxRequests = (int)$maxRequests;

$errors = [];
function fail(string $why): void
{
    global $errors;
    if (count($errors) < 20) {
        fwrite(STDERR, "php-e2e: $why\n");
    }
    $errors[] = $why;
}

$records = [];
$perTransport = [];
foreach (glob("$dir/*.status") ?: [] as $statusFile) {
    foreach (file($statusFile, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) as $line) {
        $parts = explode(' ', $line);
        if (count($parts) !== 3) {
            fail("bad status line in $statusFile: $line");
            continue;
        }
        [$code, $url, $bodyFile] = $parts;
        parse_str((string)parse_url($url, PHP_URL_QUERY), $query);
        $transport = (string)($query['t'] ?? '?');
        $perTransport[$transport] = ($perTransport[$transport] ?? 0) + 1;
        $body = @file_get_contents($bodyFile);
        if ($code !== '200') {
            fail("$url: HTTP $code: " . substr((string)$body, 0, 300));
            continue;
        }
        try {
            $r = json_decode((string)$body, true, 16, JSON_THROW_ON_ERROR);
        } catch (JsonException $e) {
            fail("$url: not JSON ({$e->getMessage()}): " . substr((string)$body, 0, 300));
            continue;
        }
        if (($r['transport'] ?? null) !== $transport) {
            fail("$url: answered for transport " . json_encode($r['transport'] ?? null));
        }
        if (($r['ok'] ?? -1) !== ($r['calls'] ?? -2) || ($r['failures'] ?? ['?']) !== []) {
            fail(sprintf('%s (pid %s): %s/%s calls ok: %s', $url, $r['pid'] ?? '?', $r['ok'] ?? '?', $r['calls'] ?? '?',
                implode('; ', (array)($r['failures'] ?? []))));
            continue;
        }
        $records[] = $r;
    }
}

$total = array_sum($perTransport);
if ($total !== $expected) {
    fail("$total responses collected, expected $expected");
}

// Replay each worker's requests in the order it served them.
$workers = [];
foreach ($records as $r) {
    $workers["{$r['pid']}@{$r['start']}"][] = $r;
}
$reusingRequests = 0;
$mostRequests = 0;
foreach ($workers as $worker => $list) {
    usort($list, fn ($a, $b) => $a['stats']['calls'] <=> $b['stats']['calls']);
    $mostRequests = max($mostRequests, count($list));
    if (count($list) > $maxRequests) {
        fail("worker $worker served " . count($list) . " requests, pm.max_requests is $maxRequests");
    }
    $seen = [];
    foreach ($list as $k => $r) {
        $n = $k + 1;
        $seen[$r['transport']] = true;
        $s = $r['stats'];
        $want = [
            'calls' => $n * $r['calls'],
            'connects' => count($seen),
            'persistent_reuses' => $n - count($seen),
            'reconnects' => 0,
            'errors' => 0,
            'persistent_sessions' => count($seen),
        ];
        foreach ($want as $key => $value) {
            if (($s[$key] ?? null) !== $value) {
                fail("worker $worker, request $n ({$r['transport']}): stats $key = "
                    . json_encode($s[$key] ?? null) . ", expected $value; stats " . json_encode($s));
                break;
            }
        }
        if ($s['persistent_reuses'] > 0) {
            $reusingRequests++;
        }
    }
}
if ($reusingRequests === 0) {
    fail('no request reused a persistent session');
}
if (count($workers) <= $children) {
    fail(count($workers) . " distinct workers for $children children: none was recycled");
}

ksort($perTransport);
$split = implode(', ', array_map(fn ($t, $n) => "$n $t", array_keys($perTransport), $perTransport));
$calls = $records === [] ? 0 : $records[0]['calls'];
printf("%d requests (%s) x %d calls ok; %d workers for %d children (at most %d requests each),"
    . " %d requests reused a persistent session\n",
    $total, $split, $calls, count($workers), $children, $mostRequests, $reusingRequests);
exit($errors === [] ? 0 : 1);
