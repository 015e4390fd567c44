--TEST--
A PHP worker serving HTTP calls under valgrind (memcheck): the request decoding, HttpResponse encoding, globals() with query, cookies, urlencoded and multipart bodies, bad results, exceptions and header()/setcookie() leak nothing and touch no invalid memory
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

exec('command -v valgrind', $found, $rc);
if ($rc !== 0) {
    echo "valgrind is not installed (ci/php-build.sh installs it)\n";
    exit(1);
}
$script = <<<'PHP'
<?php
(new Shmlink\Worker())->run(function (Shmlink\HttpRequest $req) {
    if ($req->path === '/plain') {
        return 'hello';
    }
    $req->globals();
    if ($req->path === '/bad') {
        return 42;
    }
    if ($req->path === '/throw') {
        throw new RuntimeException('thrown');
    }
    if ($req->path === '/headers') {
        header('X-H: 1');
        header('X-H: 2', false);
        header('X-Gone: 1');
        header_remove('X-Gone');
        setcookie('c', 'v');
        http_response_code(203);
        return $req->path === '/headers' ? 'with headers' : new Shmlink\HttpResponse(200);
    }
    return new Shmlink\HttpResponse(201, json_encode([$_GET, $_POST, $_COOKIE, array_keys($_FILES),
        $req->header('x-a'), $req->headers]), ['X-A' => 'b', 'Set-Cookie' => ['a=1', 'b=2']]);
});
PHP;
putenv('USE_ZEND_ALLOC=0');
$pool = PoolServer::start($script, workers: 1,
    args: ['--http', '127.0.0.1:0', '--start-timeout', '120', '--call-timeout', '120'],
    wrap: ['valgrind', '--leak-check=full', '--log-file={dir}/memcheck.%p.log']);
$http = $pool->http();
$b = 'XyZ';
$form = "--$b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n"
    . "--$b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"up.txt\"\r\n\r\nfile\r\n--$b--\r\n";
$statuses = [];
for ($round = 0; $round < 3; $round++) {
    $statuses[] = shmlink_http($http, 'GET', '/plain')[0];
    $statuses[] = shmlink_http($http, 'GET', '/q?a=1&b[]=2', '', ['X-A: 1', 'X-A: 2', 'Cookie: c=1; d=2'])[0];
    $statuses[] = shmlink_http($http, 'POST', '/p', 'p=1&q[x]=2', ['Content-Type: application/x-www-form-urlencoded'])[0];
    $statuses[] = shmlink_http($http, 'POST', '/m', $form, ["Content-Type: multipart/form-data; boundary=$b"])[0];
    $statuses[] = shmlink_http($http, 'GET', '/bad')[0];
    $statuses[] = shmlink_http($http, 'GET', '/throw')[0];
    $statuses[] = shmlink_http($http, 'GET', '/headers')[0];
}
echo implode(' ', array_unique($statuses)), "\n";
echo "pool exit ", $pool->stop(), "\n";
$logs = glob("$pool->dir/memcheck.*.log");
echo count($logs), " memcheck log\n";
$log = file_get_contents($logs[0]);
echo preg_match('/ERROR SUMMARY: 0 errors/', $log) ? "no memory errors\n" : $log;
echo preg_match('/definitely lost: 0 bytes|no leaks are possible/', $log) ? "no leaks\n" : $log;
?>
--EXPECT--
200 201 500 203
pool exit 0
1 memcheck log
no memory errors
no leaks
