--TEST--
Shmlink\Runtime\SymfonyRuntime: an unchanged Symfony public/index.php (FrameworkBundle from Debian: 5.4 on PHP 8.2, 6.4 on PHP 8.4) under shmlink pool --http: the kernel boots once per worker, services reset between requests, terminate() after the response, forms, cookies, uploads, streamed responses (chunked when the workers serve HTTP), errors
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

// The application as Composer would install it: a copy of the fixture, and
// the vendor/autoload_runtime.php Symfony Runtime's Composer plugin writes
// (from the template Debian ships), naming Symfony's runtime as default.
$app = shmlink_test_dir() . '/app';
exec('cp -r ' . escapeshellarg(__DIR__ . '/fixtures/symfony-app') . ' ' . escapeshellarg($app), $_, $rc);
if ($rc !== 0) throw new RuntimeException('cannot copy the fixture');
$template = file_get_contents('/usr/share/php/Symfony/Component/Runtime/Internal/autoload_runtime.template');
file_put_contents("$app/vendor/autoload_runtime.php", strtr($template, [
    '%runtime_class%' => var_export('Symfony\\Component\\Runtime\\SymfonyRuntime', true),
    '%runtime_options%' => var_export(['project_dir' => $app], true),
]));
putenv('SHMLINK_PHP_LIB=' . realpath(__DIR__ . '/../lib'));
putenv('APP_ENV=prod');
putenv('APP_DEBUG=0');
putenv('APP_RUNTIME=Shmlink\\Runtime\\SymfonyRuntime');

// Workers run with -n (no php.ini): the extensions Symfony needs, as Debian's
// packages of it depend on them.
$symfonyExtensions = [];
foreach (['ctype', 'mbstring', 'iconv', 'tokenizer', 'xml', 'dom'] as $ext) {
    array_push($symfonyExtensions, '-d', "extension=$ext");
}

foreach (['workers', 'front'] as $httpMode) {
    echo "== $httpMode\n";
    $pool = PoolServer::start('', workers: 2, args: ['--http', '127.0.0.1:0', '--http-mode', $httpMode],
        php: [...$symfonyExtensions, "$app/public/index.php"]);
    $http = $pool->http();

    [$status, $headers, $body] = shmlink_http($http, 'GET', '/hello/shmlink');
    echo "$status ", $headers['content-type'][0], " $body\n";
    [$status, $headers, $body] = shmlink_http($http, 'GET', '/page/twig');
    echo "$status ", $headers['content-type'][0], ' ', preg_replace('~served \d+~', 'served N', str_replace("\n", ' ', $body)), "\n";

    // Booted once per worker; the RequestCounter (kernel.reset) starts at 0 each request.
    $served = [];
    for ($i = 0; $i < 20; $i++) {
        [, , $body] = shmlink_http($http, 'GET', '/count');
        $c = json_decode($body, true);
        if ($c['in_request'] !== [1, 2] || $c['kernels'] !== 1) echo "leak: $body\n";
        $served[] = $c['served'];
    }
    echo 'served counts grow per worker: ', var_export(max($served) >= 10, true), "\n";

    [$status, , $body] = shmlink_http($http, 'POST', '/form?x=1', 'p=1&q[z]=3',
        ['Content-Type: application/x-www-form-urlencoded', 'Cookie: c1=v%201', 'X-A: 1', 'X-A: 2']);
    echo "$status $body\n";
    [$status, , $body] = shmlink_http($http, 'PUT', '/form', 'k=v', ['Content-Type: application/x-www-form-urlencoded']);
    echo "$status $body\n";
    $b = 'XyZ';
    $form = "--$b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n"
        . "--$b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"up.txt\"\r\n"
        . "Content-Type: text/plain\r\n\r\nhello file\r\n--$b--\r\n";
    [$status, , $body] = shmlink_http($http, 'POST', '/form', $form, ["Content-Type: multipart/form-data; boundary=$b"]);
    echo "$status $body\n";
    // Nothing of the previous request stays.
    [$status, , $body] = shmlink_http($http, 'GET', '/form');
    echo "$status $body\n";

    [$status, $headers, $body] = shmlink_http($http, 'GET', '/cookie');
    echo "$status $body ", implode(' | ', $headers['set-cookie']), "\n";
    [$status, $headers, $body] = shmlink_http($http, 'GET', '/stream');
    echo "$status $body (", $headers['transfer-encoding'][0] ?? 'whole', ")\n";

    $mark = "$pool->dir/terminated";
    [$status, , $body] = shmlink_http($http, 'GET', '/later?mark=' . urlencode($mark));
    echo "$status $body\n";
    echo shmlink_wait_until(fn () => @file_get_contents($mark) ?: null, 'the terminate listener'), "\n";

    [$status] = shmlink_http($http, 'GET', '/nowhere');
    echo "/nowhere: $status\n";
    echo "exit ", $pool->stop(), "\n";
}
?>
--EXPECT--
== workers
200 text/plain; charset=UTF-8 Hello, shmlink!
200 text/html; charset=UTF-8 <!DOCTYPE html> <html><head><title>shmlink</title></head> <body> <h1>Hello, twig!</h1> <ul><li>request 1</li><li>served N</li></ul> </body></html> 
served counts grow per worker: true
200 {"method":"POST","path":"\/form","query":{"x":"1"},"form":{"p":"1","q":{"z":"3"}},"cookies":{"c1":"v 1"},"content":"p=1\u0026q[z]=3","x-a":["1, 2"],"files":[],"host":"127.0.0.1:PORT","client":"127.0.0.1"}
200 {"method":"PUT","path":"\/form","query":[],"form":{"k":"v"},"cookies":[],"content":"k=v","x-a":[],"files":[],"host":"127.0.0.1:PORT","client":"127.0.0.1"}
200 {"method":"POST","path":"\/form","query":[],"form":{"a":"1"},"cookies":[],"content":"--XyZ\r\nContent-Disposition: form-data; name=\u0022a\u0022\r\n\r\n1\r\n--XyZ\r\nContent-Disposition: form-data; name=\u0022f\u0022; filename=\u0022up.txt\u0022\r\nContent-Type: text\/plain\r\n\r\nhello file\r\n--XyZ--\r\n","x-a":[],"files":{"f":["up.txt","hello file"]},"host":"127.0.0.1:PORT","client":"127.0.0.1"}
200 {"method":"GET","path":"\/form","query":[],"form":[],"cookies":[],"content":"","x-a":[],"files":[],"host":"127.0.0.1:PORT","client":"127.0.0.1"}
200 cookies a=1; path=/; httponly; samesite=lax | b=2; path=/; httponly; samesite=lax
200 first,second (chunked)
200 answered
terminated after answered
/nowhere: 404
exit 0
== front
200 text/plain; charset=UTF-8 Hello, shmlink!
200 text/html; charset=UTF-8 <!DOCTYPE html> <html><head><title>shmlink</title></head> <body> <h1>Hello, twig!</h1> <ul><li>request 1</li><li>served N</li></ul> </body></html> 
served counts grow per worker: true
200 {"method":"POST","path":"\/form","query":{"x":"1"},"form":{"p":"1","q":{"z":"3"}},"cookies":{"c1":"v 1"},"content":"p=1\u0026q[z]=3","x-a":["1, 2"],"files":[],"host":"127.0.0.1:PORT","client":"127.0.0.1"}
200 {"method":"PUT","path":"\/form","query":[],"form":{"k":"v"},"cookies":[],"content":"k=v","x-a":[],"files":[],"host":"127.0.0.1:PORT","client":"127.0.0.1"}
200 {"method":"POST","path":"\/form","query":[],"form":{"a":"1"},"cookies":[],"content":"--XyZ\r\nContent-Disposition: form-data; name=\u0022a\u0022\r\n\r\n1\r\n--XyZ\r\nContent-Disposition: form-data; name=\u0022f\u0022; filename=\u0022up.txt\u0022\r\nContent-Type: text\/plain\r\n\r\nhello file\r\n--XyZ--\r\n","x-a":[],"files":{"f":["up.txt","hello file"]},"host":"127.0.0.1:PORT","client":"127.0.0.1"}
200 {"method":"GET","path":"\/form","query":[],"form":[],"cookies":[],"content":"","x-a":[],"files":[],"host":"127.0.0.1:PORT","client":"127.0.0.1"}
200 cookies a=1; path=/; httponly; samesite=lax | b=2; path=/; httponly; samesite=lax
200 first,second (whole)
200 answered
terminated after answered
/nowhere: 404
exit 0