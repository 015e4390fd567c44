--TEST--
A PHP worker serving HTTP calls under valgrind (memcheck): the request decoding, HttpResponse encoding, globals() with query, cookies, urlencoded and multipart bodies, bad results, exceptions, header()/setcookie(), streamed responses (flush(), stream()/write()/end()) and spooled bodies (bodyStream(), php://input, multipart from the file) leak nothing and touch no invalid memory
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
$w = new Shmlink\Worker();
$w->run(function (Shmlink\HttpRequest $req) use (&$w) {
    if ($req->path === '/plain') {
        return 'hello';
    }
    if ($req->path === '/stream') {
        header('Content-Type: text/event-stream');
        ob_start();
        echo "data: 1\n\n";
        flush();
        $w->write("data: 2\n\n");
        echo "data: 3\n\n";
        return ob_get_clean();
    }
    if ($req->path === '/api') {
        $w->stream(new Shmlink\HttpResponse(202, 'a'));
        $w->write('b');
        $w->end();
        return;
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
    if ($req->path === '/spooled') {
        $n = strlen(stream_get_contents($req->bodyStream())) + strlen(file_get_contents('php://input'));
        return new Shmlink\HttpResponse(201, "$n " . implode(',', array_keys($_FILES)));
    }
    return new Shmlink\HttpResponse(201, json_encode([$_GET, $_POST, $_COOKIE, array_keys($_FILES),
        $req->header('x-a'), $req->headers]), ['X-A' => 'b', 'Set-Cookie' => ['a=1', 'b=2']]);
});
PHP;
putenv('USE_ZEND_ALLOC=0');
$pool = PoolServer::start($script, workers: 1,
    args: ['--http', '127.0.0.1:0', '--start-timeout', '120', '--call-timeout', '120', '--http-spool-over', '1K'],
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
    $statuses[] = shmlink_http($http, 'GET', '/stream')[0];
    $statuses[] = shmlink_http($http, 'GET', '/api')[0];
    $statuses[] = shmlink_http($http, 'POST', '/spooled', str_repeat('x', 5000))[0];
    $big = "--$b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"big.txt\"\r\n\r\n"
        . str_repeat('y', 5000) . "\r\n--$b--\r\n";
    $statuses[] = shmlink_http($http, 'POST', '/spooled', $big, ["Content-Type: multipart/form-data; boundary=$b"])[0];
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
200 201 500 203 202
pool exit 0
1 memcheck log
no memory errors
no leaks
