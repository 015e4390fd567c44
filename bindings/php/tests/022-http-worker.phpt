--TEST--
shmlink pool --http with PHP workers: Shmlink\HttpRequest in, a string or Shmlink\HttpResponse out, globals() for classic scripts, accept()/respond() in pieces, errors as 500
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

$script = <<<'PHP'
<?php
$handler = function ($req) {
    if (!$req instanceof Shmlink\HttpRequest) {
        return "plain:$req";
    }
    switch ($req->path) {
        case '/hello':
            return 'Hello, world!';
        case '/request':
            return new Shmlink\HttpResponse(201, json_encode([
                'method' => $req->method, 'uri' => $req->uri, 'path' => $req->path,
                'query' => $req->query, 'protocol' => $req->protocol, 'body' => $req->body,
                'x-a' => $req->headers['x-a'] ?? null, 'host' => preg_replace('~:\d+$~', ':PORT', $req->header('HOST')),
                'remote' => preg_match('~^127\.0\.0\.1:\d+$~', $req->remoteAddr) === 1,
            ]), ['Content-Type' => 'application/json', 'X-Multi' => ['a', 'b']]);
        case '/globals':
            $req->globals();
            $s = $_SERVER;
            return json_encode([
                'get' => $_GET, 'post' => $_POST, 'cookie' => $_COOKIE, 'request' => $_REQUEST,
                'server' => [$s['REQUEST_METHOD'], $s['REQUEST_URI'], $s['QUERY_STRING'],
                    $s['SERVER_PROTOCOL'], $s['REMOTE_ADDR'], $s['HTTP_X_A'] ?? null,
                    $s['CONTENT_TYPE'] ?? null, $s['SERVER_NAME'], isset($s['REQUEST_TIME_FLOAT'])],
            ]);
        case '/upload':
            $req->globals();
            $files = [];
            foreach ($_FILES as $k => $f) {
                $files[$k] = [$f['name'], $f['type'], $f['size'], $f['error'],
                    file_get_contents($f['tmp_name']), is_uploaded_file($f['tmp_name'])];
                $GLOBALS['tmp'][] = $f['tmp_name'];
            }
            $gone = array_map(fn ($t) => !file_exists($t), array_slice($GLOBALS['tmp'], 0, -count($files)));
            return json_encode(['post' => $_POST, 'files' => $files, 'earlier_removed' => $gone]);
        case '/int':
            return 42;
        case '/throw':
            throw new RuntimeException('boom', 7);
    }
    return new Shmlink\HttpResponse(404, 'not here');
};
$w = new Shmlink\Worker();
if (getenv('PIECES') === '1') {
    while (($req = $w->accept()) !== null) {
        try {
            $w->respond($handler($req));
        } catch (Throwable $e) {
            $w->fail($e->getCode(), get_class($e) . ': ' . $e->getMessage());
        }
    }
} else {
    $w->run($handler);
}
PHP;

foreach ([['workers', 'run', '0'], ['workers', 'accept/respond', '1'], ['front', 'run', '0'], ['front', 'accept/respond', '1']]
        as [$httpMode, $mode, $pieces]) {
    echo "== $httpMode, $mode\n";
    putenv("PIECES=$pieces");
    $pool = PoolServer::start($script, workers: 1, args: ['--http', '127.0.0.1:0', '--http-mode', $httpMode]);
    $http = $pool->http();

    [$status, $headers, $body] = shmlink_http($http, 'GET', '/hello');
    echo "$status ", $headers['content-type'][0], " $body\n";

    [$status, $headers, $body] = shmlink_http($http, 'POST', '/request?x=1', 'payload', ['X-A: 1', 'X-A: 2']);
    echo "$status ", $headers['content-type'][0], ' ', implode(',', $headers['x-multi']), "\n$body\n";

    [$status, , $body] = shmlink_http($http, 'POST', '/globals?a=1&b[]=2', 'p=1&q[x]=3',
        ['Content-Type: application/x-www-form-urlencoded', 'Cookie: c1=v%201; c2=w', 'X-A: 9']);
    echo "$status $body\n";
    // Nothing of the previous request stays.
    [$status, , $body] = shmlink_http($http, 'GET', '/globals');
    echo "$status $body\n";

    // multipart/form-data: fields in $_POST, files in $_FILES (removed after the call).
    $b = 'XyZ';
    $form = "--$b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n"
        . "--$b\r\nContent-Disposition: form-data; name=\"b[x]\"\r\n\r\n2\r\n"
        . "--$b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"up.txt\"\r\n"
        . "Content-Type: text/plain\r\n\r\nhello file\r\n--$b--\r\n";
    foreach ([1, 2] as $round) {
        [$status, , $body] = shmlink_http($http, 'POST', '/upload', $form,
            ["Content-Type: multipart/form-data; boundary=$b"]);
        echo "$status $body\n";
    }

    foreach (['/nope', '/int', '/throw'] as $path) {
        [$status, , $body] = shmlink_http($http, 'GET', $path);
        echo "$path: $status ", trim($body), "\n";
    }
    // Not over HTTP: a plain call through the pool still gets a string (a
    // pool whose workers serve HTTP takes no calls).
    if ($httpMode === 'front') {
        echo (new Shmlink\Client($pool->addresses['shm']))->call('x'), "\n";
    }
    // The workers' output reaches the pool's log through a pipe, a moment later.
    $logged = fn () => str_contains($log = $pool->log(), 'the handler returned int, expected string or Shmlink\HttpResponse')
        && str_contains($log, 'RuntimeException: boom') ? true : null;
    echo "logged: ", var_export(shmlink_wait_until($logged, 'the log lines'), true), "\n";
    echo "exit ", $pool->stop(), "\n";
}
?>
--EXPECT--
== workers, run
200 text/html; charset=UTF-8 Hello, world!
201 application/json a,b
{"method":"POST","uri":"\/request?x=1","path":"\/request","query":"x=1","protocol":"HTTP\/1.1","body":"payload","x-a":["1","2"],"host":"127.0.0.1:PORT","remote":true}
200 {"get":{"a":"1","b":["2"]},"post":{"p":"1","q":{"x":"3"}},"cookie":{"c1":"v 1","c2":"w"},"request":{"a":"1","b":["2"],"p":"1","q":{"x":"3"}},"server":["POST","\/globals?a=1&b[]=2","a=1&b[]=2","HTTP\/1.1","127.0.0.1","9","application\/x-www-form-urlencoded","127.0.0.1",true]}
200 {"get":[],"post":[],"cookie":[],"request":[],"server":["GET","\/globals","","HTTP\/1.1","127.0.0.1",null,null,"127.0.0.1",true]}
200 {"post":{"a":"1","b":{"x":"2"}},"files":{"f":["up.txt","text\/plain",10,0,"hello file",true]},"earlier_removed":[]}
200 {"post":{"a":"1","b":{"x":"2"}},"files":{"f":["up.txt","text\/plain",10,0,"hello file",true]},"earlier_removed":[true]}
/nope: 404 not here
/int: 500 500 Internal Server Error
/throw: 500 500 Internal Server Error
logged: true
exit 0
== workers, accept/respond
200 text/html; charset=UTF-8 Hello, world!
201 application/json a,b
{"method":"POST","uri":"\/request?x=1","path":"\/request","query":"x=1","protocol":"HTTP\/1.1","body":"payload","x-a":["1","2"],"host":"127.0.0.1:PORT","remote":true}
200 {"get":{"a":"1","b":["2"]},"post":{"p":"1","q":{"x":"3"}},"cookie":{"c1":"v 1","c2":"w"},"request":{"a":"1","b":["2"],"p":"1","q":{"x":"3"}},"server":["POST","\/globals?a=1&b[]=2","a=1&b[]=2","HTTP\/1.1","127.0.0.1","9","application\/x-www-form-urlencoded","127.0.0.1",true]}
200 {"get":[],"post":[],"cookie":[],"request":[],"server":["GET","\/globals","","HTTP\/1.1","127.0.0.1",null,null,"127.0.0.1",true]}
200 {"post":{"a":"1","b":{"x":"2"}},"files":{"f":["up.txt","text\/plain",10,0,"hello file",true]},"earlier_removed":[]}
200 {"post":{"a":"1","b":{"x":"2"}},"files":{"f":["up.txt","text\/plain",10,0,"hello file",true]},"earlier_removed":[true]}
/nope: 404 not here
/int: 500 500 Internal Server Error
/throw: 500 500 Internal Server Error
logged: true
exit 0
== front, run
200 text/html; charset=UTF-8 Hello, world!
201 application/json a,b
{"method":"POST","uri":"\/request?x=1","path":"\/request","query":"x=1","protocol":"HTTP\/1.1","body":"payload","x-a":["1","2"],"host":"127.0.0.1:PORT","remote":true}
200 {"get":{"a":"1","b":["2"]},"post":{"p":"1","q":{"x":"3"}},"cookie":{"c1":"v 1","c2":"w"},"request":{"a":"1","b":["2"],"p":"1","q":{"x":"3"}},"server":["POST","\/globals?a=1&b[]=2","a=1&b[]=2","HTTP\/1.1","127.0.0.1","9","application\/x-www-form-urlencoded","127.0.0.1",true]}
200 {"get":[],"post":[],"cookie":[],"request":[],"server":["GET","\/globals","","HTTP\/1.1","127.0.0.1",null,null,"127.0.0.1",true]}
200 {"post":{"a":"1","b":{"x":"2"}},"files":{"f":["up.txt","text\/plain",10,0,"hello file",true]},"earlier_removed":[]}
200 {"post":{"a":"1","b":{"x":"2"}},"files":{"f":["up.txt","text\/plain",10,0,"hello file",true]},"earlier_removed":[true]}
/nope: 404 not here
/int: 500 500 Internal Server Error
/throw: 500 500 Internal Server Error
plain:x
logged: true
exit 0
== front, accept/respond
200 text/html; charset=UTF-8 Hello, world!
201 application/json a,b
{"method":"POST","uri":"\/request?x=1","path":"\/request","query":"x=1","protocol":"HTTP\/1.1","body":"payload","x-a":["1","2"],"host":"127.0.0.1:PORT","remote":true}
200 {"get":{"a":"1","b":["2"]},"post":{"p":"1","q":{"x":"3"}},"cookie":{"c1":"v 1","c2":"w"},"request":{"a":"1","b":["2"],"p":"1","q":{"x":"3"}},"server":["POST","\/globals?a=1&b[]=2","a=1&b[]=2","HTTP\/1.1","127.0.0.1","9","application\/x-www-form-urlencoded","127.0.0.1",true]}
200 {"get":[],"post":[],"cookie":[],"request":[],"server":["GET","\/globals","","HTTP\/1.1","127.0.0.1",null,null,"127.0.0.1",true]}
200 {"post":{"a":"1","b":{"x":"2"}},"files":{"f":["up.txt","text\/plain",10,0,"hello file",true]},"earlier_removed":[]}
200 {"post":{"a":"1","b":{"x":"2"}},"files":{"f":["up.txt","text\/plain",10,0,"hello file",true]},"earlier_removed":[true]}
/nope: 404 not here
/int: 500 500 Internal Server Error
/throw: 500 500 Internal Server Error
plain:x
logged: true
exit 0
