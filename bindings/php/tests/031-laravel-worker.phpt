--TEST--
Shmlink\Laravel\Worker (bin/laravel-worker.php): a Laravel application from Debian's package (8.83 on PHP 8.2, 10.48 on PHP 8.4) under shmlink pool --http, booted once per worker, each request on a fresh sandbox: sessions never mixed between 2 clients interleaving 2 x 1,000 requests over 2 workers, configuration changes and request-made singletons not carried over, forms, streamed responses, error pages
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

$app = shmlink_test_dir() . '/app';
exec('cp -r ' . escapeshellarg(__DIR__ . '/fixtures/laravel-app') . ' ' . escapeshellarg($app), $_, $rc);
if ($rc !== 0) throw new RuntimeException('cannot copy the fixture');
putenv('SHMLINK_PHP_LIB=' . realpath(__DIR__ . '/../lib'));
// Workers run with -n (no php.ini): the extensions Laravel needs, as
// Debian's package of it depends on them.
$php = [];
foreach (['ctype', 'mbstring', 'iconv', 'tokenizer', 'xml', 'dom', 'fileinfo', 'intl'] as $ext) {
    array_push($php, '-d', "extension=$ext");
}
array_push($php, realpath(__DIR__ . '/../lib/bin/laravel-worker.php'), $app);

/** The session cookie a response sets, as a Cookie header line. */
function session_cookie(array $headers): string
{
    foreach ($headers['set-cookie'] ?? [] as $c) {
        if (str_starts_with($c, 'shmlink_session=')) return 'Cookie: ' . explode(';', $c, 2)[0];
    }
    throw new RuntimeException('no session cookie');
}

foreach (['workers', 'front'] as $httpMode) {
    echo "== $httpMode\n";
    $pool = PoolServer::start('', workers: 2, args: ['--http', '127.0.0.1:0', '--http-mode', $httpMode], php: $php);
    $http = $pool->http();

    [$status, $headers, $body] = shmlink_http($http, 'GET', '/hello/shmlink');
    echo "$status ", $headers['content-type'][0], " $body\n";

    // Booted once per worker; a singleton first made in a request, and a
    // configuration change, live only as long as that request's sandbox.
    $bad = 0;
    for ($i = 0; $i < 20; $i++) {
        [, , $body] = shmlink_http($http, 'GET', '/count');
        $bad += $body !== '{"counter":1,"booted":1,"same_app":true}';
        [, , $body] = shmlink_http($http, 'GET', '/config');
        $bad += $body !== '{"seen":"shmlink test app"}';
    }
    echo "carried over: $bad\n";

    // Two clients interleave; each must always find its own last value.
    $cookie = [];
    $last = [];
    $mixed = 0;
    for ($i = 0; $i < 1000; $i++) {
        foreach (['a', 'b'] as $who) {
            $v = "$who$i";
            [$status, $headers, $body] = shmlink_http($http, 'GET', "/session?v=$v", '',
                isset($cookie[$who]) ? [$cookie[$who]] : []);
            $got = json_decode($body, true);
            if ($status !== 200 || $got['before'] !== ($last[$who] ?? null) || $got['now'] !== $v) {
                $mixed++;
            }
            $cookie[$who] = session_cookie($headers);
            $last[$who] = $v;
        }
    }
    echo "sessions mixed: $mixed of 2000\n";
    // Sequential requests are packed: the front hands each to the first
    // idle worker; workers serving HTTP themselves leave new connections to
    // the first that takes them, and spread them by load only (so where
    // they go depends on the machine's CPU at the moment).
    $busy = count(array_filter($pool->status()['workers'], fn ($w) => $w['calls'] > 200));
    echo 'a worker served over 200: ', var_export($busy >= 1, true), "\n";

    [$status, , $body] = shmlink_http($http, 'POST', '/form?q=1', 'a=1&b[]=2',
        ['Content-Type: application/x-www-form-urlencoded', 'X-A: 9']);
    echo "$status $body\n";
    [$status, , $body] = shmlink_http($http, 'PUT', '/form', '{"k":[1,2]}', ['Content-Type: application/json']);
    echo "$status $body\n";
    [$status, , $body] = shmlink_http($http, 'GET', '/stream');
    echo "$status $body\n";
    foreach (['/fail', '/nowhere'] as $path) {
        [$status, , $body] = shmlink_http($http, 'GET', $path);
        echo "$path: $status ", var_export(str_contains($body, '<!DOCTYPE html>'), true), "\n";
    }
    echo 'exceptions logged by the app: ', var_export(str_contains((string) @file_get_contents("$app/storage/logs/laravel.log"), 'DomainException'), true), "\n";
    echo "exit ", $pool->stop(), "\n";
}
?>
--EXPECT--
== workers
200 text/plain; charset=UTF-8 Hello, shmlink!
carried over: 0
sessions mixed: 0 of 2000
a worker served over 200: true
200 {"method":"POST","query":{"q":"1"},"input":{"a":"1","b":["2"]},"json":null,"x-a":"9","files":[]}
200 {"method":"PUT","query":[],"input":{"k":[1,2]},"json":{"k":[1,2]},"x-a":null,"files":[]}
200 first,second
/fail: 500 true
/nowhere: 404 true
exceptions logged by the app: true
exit 0
== front
200 text/plain; charset=UTF-8 Hello, shmlink!
carried over: 0
sessions mixed: 0 of 2000
a worker served over 200: true
200 {"method":"POST","query":{"q":"1"},"input":{"a":"1","b":["2"]},"json":null,"x-a":"9","files":[]}
200 {"method":"PUT","query":[],"input":{"k":[1,2]},"json":{"k":[1,2]},"x-a":null,"files":[]}
200 first,second
/fail: 500 true
/nowhere: 404 true
exceptions logged by the app: true
exit 0