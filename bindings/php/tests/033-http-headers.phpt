--TEST--
header(), setcookie(), header_remove() and http_response_code() in an HTTP worker: the answer carries them (a returned Shmlink\HttpResponse's own status and headers win), and nothing of one request reaches the next, output buffers left open included
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

$script = <<<'PHP'
<?php
(new Shmlink\Worker())->run(function (Shmlink\HttpRequest $req) {
    $req->globals();
    ob_start();
    switch ($req->path) {
        case '/classic':
            header('Content-Type: application/json');
            header('X-A: 1');
            header('X-A: 2', false);
            header('X-Gone: 1');
            header_remove('X-Gone');
            setcookie('c', 'v 1', ['path' => '/', 'httponly' => true]);
            http_response_code(201);
            echo json_encode(['headers_list' => headers_list()]);
            return ob_get_clean();
        case '/object':
            header('Content-Type: text/plain');
            header('X-B: from header()');
            http_response_code(500);
            return new Shmlink\HttpResponse(202, 'object', ['content-type' => 'application/xml']);
        case '/redirect':
            header('Location: /elsewhere', true, 302);
            return '';
        case '/leave':
            ob_start();
            echo 'left open';
            return 'left';
    }
    echo 'plain at output level ' . ob_get_level();
    return ob_get_clean();
});
PHP;

function show(array $r): string
{
    [$status, $headers, $body] = $r;
    unset($headers['date'], $headers['content-length'], $headers['connection'], $headers['server']);
    ksort($headers);
    return "$status " . json_encode($headers) . " $body";
}

foreach (['workers', 'front'] as $httpMode) {
    echo "== $httpMode\n";
    $pool = PoolServer::start($script, workers: 1, args: ['--http', '127.0.0.1:0', '--http-mode', $httpMode]);
    $http = $pool->http();
    foreach (['/classic', '/plain', '/object', '/plain', '/redirect', '/plain', '/leave', '/leave', '/plain'] as $path) {
        echo "$path: ", show(shmlink_http($http, 'GET', $path)), "\n";
    }
    echo "exit ", $pool->stop(), "\n";
}
?>
--EXPECT--
== workers
/classic: 201 {"content-type":["application\/json"],"set-cookie":["c=v%201; path=\/; HttpOnly"],"x-a":["1","2"]} {"headers_list":["Content-Type: application\/json","X-A: 1","X-A: 2","Set-Cookie: c=v%201; path=\/; HttpOnly"]}
/plain: 200 {"content-type":["text\/html; charset=UTF-8"]} plain at output level 1
/object: 202 {"content-type":["application\/xml"],"x-b":["from header()"]} object
/plain: 200 {"content-type":["text\/html; charset=UTF-8"]} plain at output level 1
/redirect: 302 {"content-type":["text\/html; charset=UTF-8"],"location":["\/elsewhere"]} 
/plain: 200 {"content-type":["text\/html; charset=UTF-8"]} plain at output level 1
/leave: 200 {"content-type":["text\/html; charset=UTF-8"]} left
/leave: 200 {"content-type":["text\/html; charset=UTF-8"]} left
/plain: 200 {"content-type":["text\/html; charset=UTF-8"]} plain at output level 1
exit 0
== front
/classic: 201 {"content-type":["application\/json"],"set-cookie":["c=v%201; path=\/; HttpOnly"],"x-a":["1","2"]} {"headers_list":["Content-Type: application\/json","X-A: 1","X-A: 2","Set-Cookie: c=v%201; path=\/; HttpOnly"]}
/plain: 200 {"content-type":["text\/html; charset=UTF-8"]} plain at output level 1
/object: 202 {"content-type":["application\/xml"],"x-b":["from header()"]} object
/plain: 200 {"content-type":["text\/html; charset=UTF-8"]} plain at output level 1
/redirect: 302 {"content-type":["text\/html; charset=UTF-8"],"location":["\/elsewhere"]} 
/plain: 200 {"content-type":["text\/html; charset=UTF-8"]} plain at output level 1
/leave: 200 {"content-type":["text\/html; charset=UTF-8"]} left
/leave: 200 {"content-type":["text\/html; charset=UTF-8"]} left
/plain: 200 {"content-type":["text\/html; charset=UTF-8"]} plain at output level 1
exit 0