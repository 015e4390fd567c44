--TEST--
exit() in a request of an HTTP worker (in run()'s handler, or between accept() and respond()): the client gets what the request printed so far (every output buffer it left open) with the status http_response_code() set, the worker is replaced, the next request is served
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

$script = <<<'PHP'
<?php
$handler = function (Shmlink\HttpRequest $req) {
    $req->globals();
    ob_start();
    echo "before ";
    if ($req->path === '/exit') {
        http_response_code(202);
        ob_start();
        echo "inner ";
        exit();
    }
    if ($req->path === '/die') {
        die("dying words");
    }
    return new Shmlink\HttpResponse(200, ob_get_clean() . getmypid());
};
$w = new Shmlink\Worker();
if (getenv('PIECES') === '1') {
    // accept()/respond(), as the PSR-7, Symfony and Laravel runners do.
    while (($req = $w->accept()) !== null) {
        $w->respond($handler($req));
    }
} else {
    $w->run($handler);
}
PHP;

foreach ([['workers', '0'], ['front', '0'], ['workers', '1'], ['front', '1']] as [$httpMode, $pieces]) {
    echo "== $httpMode", $pieces === '1' ? ', accept/respond' : ', run', "\n";
    putenv("PIECES=$pieces");
    $pool = PoolServer::start($script, workers: 1, args: ['--http', '127.0.0.1:0', '--http-mode', $httpMode]);
    $http = $pool->http();
    [$status, , $body] = shmlink_http($http, 'GET', '/ok');
    $first = (int) substr($body, strlen('before '));
    echo "$status ", preg_replace('~\d+$~', 'PID', $body), "\n";
    [$status, , $body] = shmlink_http($http, 'GET', '/exit');
    echo "/exit: $status $body\n";
    $pool->ready(1);
    [$status, , $body] = shmlink_http($http, 'GET', '/ok');
    $second = (int) substr($body, strlen('before '));
    echo "$status served by another worker: ", var_export($second !== $first && $second > 0, true), "\n";
    [$status, , $body] = shmlink_http($http, 'GET', '/die');
    echo "/die: $status $body\n";
    $pool->ready(1);
    [$status] = shmlink_http($http, 'GET', '/ok');
    echo "then: $status\n";
    echo "exit ", $pool->stop(), "\n";
}
?>
--EXPECT--
== workers, run
200 before PID
/exit: 202 before inner 
200 served by another worker: true
/die: 200 before dying words
then: 200
exit 0
== front, run
200 before PID
/exit: 202 before inner 
200 served by another worker: true
/die: 200 before dying words
then: 200
exit 0
== workers, accept/respond
200 before PID
/exit: 202 before inner 
200 served by another worker: true
/die: 200 before dying words
then: 200
exit 0
== front, accept/respond
200 before PID
/exit: 202 before inner 
200 served by another worker: true
/die: 200 before dying words
then: 200
exit 0