--TEST--
Request bodies over --http-spool-over go to an unnamed file as they arrive: a 1 GiB upload leaves the pool's and the worker's peak memory under 64 MiB above where they were, php://input, bodyStream(), $_FILES (multipart) and PSR-7 read it, nothing stays in the spool directory; small bodies stay in the request; a client cannot name a file itself; --http-max-body still answers 413 while a body streams in; both HTTP modes
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

$lib = realpath(__DIR__ . '/../lib/autoload.php');
$script = <<<PHP
<?php
require '$lib';
require 'Nyholm/Psr7/autoload.php';
\$f = new Nyholm\Psr7\Factory\Psr17Factory();
\$psr7 = new Shmlink\Psr7\RequestBuilder(\$f, \$f, \$f);
\$w = new Shmlink\Worker();
\$w->run(function (Shmlink\HttpRequest \$req) use (\$psr7) {
    \$sum = function (\$stream): string {
        \$ctx = hash_init('md5');
        \$n = hash_update_stream(\$ctx, \$stream);
        return \$n . ' ' . hash_final(\$ctx);
    };
    \$spooled = \$req->header('x-shmlink-body-file') !== null ? 'spooled' : 'in memory';
    switch (\$req->path) {
        case '/input':
            \$req->globals();
            return "\$spooled, body " . strlen(\$req->body) . ", php://input " . \$sum(fopen('php://input', 'rb'))
                . ", bodyStream " . \$sum(\$req->bodyStream());
        case '/form':
            \$req->globals();
            \$f = \$_FILES['f'];
            return "\$spooled, a=" . \$_POST['a'] . ", file " . \$f['name'] . ' ' . \$f['size'] . ' ' . md5_file(\$f['tmp_name']);
        case '/psr7':
            \$body = \$psr7->build(\$req)->getBody();
            \$ctx = hash_init('md5');
            \$n = 0;
            while (!\$body->eof()) {
                \$piece = \$body->read(1 << 20);
                \$n += strlen(\$piece);
                hash_update(\$ctx, \$piece);
            }
            return "\$spooled, PSR-7 \$n " . hash_final(\$ctx);
    }
    return 'nothing at ' . \$req->path;
});
PHP;

/** Sends $size zero bytes to $target (Content-Length, or chunked), in 1 MiB writes; the response. */
function upload(string $http, string $target, int $size, bool $chunked = false, string $type = 'application/octet-stream'): array
{
    $s = stream_socket_client("tcp://$http", $errno, $errstr, 10);
    stream_set_timeout($s, 60);
    $framing = $chunked ? "Transfer-Encoding: chunked" : "Content-Length: $size";
    fwrite($s, "POST $target HTTP/1.1\r\nHost: t\r\nContent-Type: $type\r\n$framing\r\nConnection: close\r\n\r\n");
    $block = str_repeat("\0", 1 << 20);
    for ($left = $size; $left > 0; $left -= strlen($piece)) {
        $piece = $left >= strlen($block) ? $block : substr($block, 0, $left);
        $bytes = $chunked ? dechex(strlen($piece)) . "\r\n$piece\r\n" : $piece;
        if (@fwrite($s, $bytes) === false) {
            break; // refused mid-body
        }
    }
    if ($chunked) {
        @fwrite($s, "0\r\n\r\n");
    }
    $raw = stream_get_contents($s);
    fclose($s);
    [$head, $body] = explode("\r\n\r\n", $raw, 2) + [1 => ''];
    return [(int)explode(' ', $head)[1], $body];
}

/** Resident and peak resident memory of $pid, KiB. */
function memory(int $pid): array
{
    preg_match('/VmRSS:\s+(\d+)/', file_get_contents("/proc/$pid/status"), $rss);
    preg_match('/VmHWM:\s+(\d+)/', file_get_contents("/proc/$pid/status"), $hwm);
    return [(int)$rss[1], (int)$hwm[1]];
}

$zeros = fn (int $n) => $n . ' ' . md5(str_repeat("\0", $n));
foreach (['workers', 'front'] as $mode) {
    echo "== $mode\n";
    $spool = shmlink_test_dir() . '/spool';
    mkdir($spool);
    $pool = PoolServer::start($script, workers: 1, args: ['--http', '127.0.0.1:0', '--http-mode', $mode,
        '--http-max-body', '2G', '--http-spool-dir', $spool]);
    $http = $pool->http();

    // Small: in the request.
    [$status, $body] = upload($http, '/input', 1000);
    echo "$status $body\n";

    // 1 GiB: spooled; memory stays flat in the pool and in the worker.
    $worker = $pool->status()['workers'][0]['pid'];
    $pool_pid = $pool->pid();
    [$pool_rss] = memory($pool_pid);
    [$worker_rss] = memory($worker);
    [$status, $body] = upload($http, '/input', 1 << 30);
    echo "$status $body\n";
    echo "1 GiB: zeros ", $body === "spooled, body 0, php://input 1073741824 cd573cfaace07e7949bc0c46028904ff, bodyStream 1073741824 cd573cfaace07e7949bc0c46028904ff" ? 'intact' : 'garbled', "\n";
    [, $pool_hwm] = memory($pool_pid);
    [, $worker_hwm] = memory($worker);
    echo "peak memory growth under 64 MiB: pool ", var_export($pool_hwm - $pool_rss < 65536, true),
        ", worker ", var_export($worker_hwm - $worker_rss < 65536, true), "\n";
    if ($pool_hwm - $pool_rss >= 65536 || $worker_hwm - $worker_rss >= 65536) {
        echo "pool $pool_rss -> $pool_hwm KiB, worker $worker_rss -> $worker_hwm KiB\n";
    }
    clearstatcache();
    echo "spool directory empty: ", var_export(scandir($spool) === ['.', '..'], true), "\n";

    // Chunked, multipart and PSR-7, spooled too.
    [$status, $body] = upload($http, '/psr7', 5 << 20, chunked: true);
    echo "$status $body (", $body === 'spooled, PSR-7 ' . $zeros(5 << 20) ? 'intact' : 'garbled', ")\n";
    $b = 'XyZ';
    $file = str_repeat('f', 1536 * 1024);
    $form = "--$b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n"
        . "--$b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"big.txt\"\r\nContent-Type: text/plain\r\n\r\n$file\r\n--$b--\r\n";
    [$status, , $body] = shmlink_http($http, 'POST', '/form', $form, ["Content-Type: multipart/form-data; boundary=$b"]);
    echo "$status $body (", str_ends_with($body, md5($file)) ? 'intact' : 'garbled', ")\n";

    // Only the server names a spooled body.
    [$status, , $body] = shmlink_http($http, 'POST', '/input', 'tiny', ['X-Shmlink-Body-File: /etc/passwd']);
    echo "$status $body\n";
    $pool->stop();

    // The body limit still answers 413 while a chunked body streams in.
    $pool = PoolServer::start($script, workers: 1, args: ['--http', '127.0.0.1:0', '--http-mode', $mode,
        '--http-max-body', '8M', '--http-spool-dir', $spool]);
    [$status] = upload($pool->http(), '/input', 10 << 20, chunked: true);
    echo "10 MiB chunked over 8M: $status\n";
    clearstatcache();
    echo "spool directory empty: ", var_export(scandir($spool) === ['.', '..'], true), "\n";
    $pool->stop();
}
?>
--EXPECT--
== workers
200 in memory, body 1000, php://input 1000 ede3d3b685b4e137ba4cb2521329a75e, bodyStream 1000 ede3d3b685b4e137ba4cb2521329a75e
200 spooled, body 0, php://input 1073741824 cd573cfaace07e7949bc0c46028904ff, bodyStream 1073741824 cd573cfaace07e7949bc0c46028904ff
1 GiB: zeros intact
peak memory growth under 64 MiB: pool true, worker true
spool directory empty: true
200 spooled, PSR-7 5242880 5f363e0e58a95f06cbe9bbc662c5dfb6 (intact)
200 spooled, a=1, file big.txt 1572864 cdce7157806a3db99fb88755567c9c36 (intact)
200 in memory, body 4, php://input 4 d60cadf1a41c651e1f0ade50136bad43, bodyStream 4 d60cadf1a41c651e1f0ade50136bad43
10 MiB chunked over 8M: 413
spool directory empty: true
== front
200 in memory, body 1000, php://input 1000 ede3d3b685b4e137ba4cb2521329a75e, bodyStream 1000 ede3d3b685b4e137ba4cb2521329a75e
200 spooled, body 0, php://input 1073741824 cd573cfaace07e7949bc0c46028904ff, bodyStream 1073741824 cd573cfaace07e7949bc0c46028904ff
1 GiB: zeros intact
peak memory growth under 64 MiB: pool true, worker true
spool directory empty: true
200 spooled, PSR-7 5242880 5f363e0e58a95f06cbe9bbc662c5dfb6 (intact)
200 spooled, a=1, file big.txt 1572864 cdce7157806a3db99fb88755567c9c36 (intact)
200 in memory, body 4, php://input 4 d60cadf1a41c651e1f0ade50136bad43, bodyStream 4 d60cadf1a41c651e1f0ade50136bad43
10 MiB chunked over 8M: 413
spool directory empty: true
