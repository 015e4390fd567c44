--TEST--
Shmlink\Psr7\Worker: a PSR-15 handler under shmlink pool --http with nyholm/psr7 and guzzlehttp/psr7 (Debian packages): method, URI, protocol, headers, query, cookies, parsed and raw bodies, uploaded files, server params; nothing carried over; an exception is a 500 and the worker goes on
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
require getenv('PSR7') === 'guzzle' ? 'GuzzleHttp/Psr7/autoload.php' : 'Nyholm/Psr7/autoload.php';

use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Server\RequestHandlerInterface;

final class App implements RequestHandlerInterface
{
    public function __construct(private \$f) {}

    public function handle(ServerRequestInterface \$r): ResponseInterface
    {
        if (\$r->getUri()->getPath() === '/throw') {
            throw new DomainException('boom');
        }
        if (\$r->getUri()->getPath() === '/big') {
            // Over 1 MiB: streamed.
            return \$this->f->createResponse(200)->withHeader('Content-Type', 'application/octet-stream')
                ->withBody(\$this->f->createStream(str_repeat('0123456789abcdef', 131072)));
        }
        \$tree = function (array \$files) use (&\$tree) {
            return array_map(fn (\$f) => is_array(\$f) ? \$tree(\$f) : [\$f->getClientFilename(),
                \$f->getClientMediaType(), \$f->getSize(), \$f->getError(), (string) \$f->getStream()], \$files);
        };
        \$files = \$tree(\$r->getUploadedFiles());
        \$seen = [
            'class' => get_class(\$r),
            'method' => \$r->getMethod(),
            'uri' => preg_replace('~:\d+/~', ':PORT/', (string) \$r->getUri()),
            'protocol' => \$r->getProtocolVersion(),
            'x-a' => \$r->getHeader('X-A'),
            'query' => \$r->getQueryParams(),
            'cookies' => \$r->getCookieParams(),
            'parsed' => \$r->getParsedBody(),
            'body' => str_starts_with(\$r->getHeaderLine('content-type'), 'multipart/') ? 'multipart' : (string) \$r->getBody(),
            'files' => \$files,
            'server' => [\$r->getServerParams()['REQUEST_METHOD'], \$r->getServerParams()['REMOTE_ADDR']],
        ];
        return \$this->f->createResponse(201)
            ->withHeader('Content-Type', 'application/json')
            ->withHeader('X-Multi', ['a', 'b'])
            ->withBody(\$this->f->createStream(json_encode(\$seen)));
    }
}

\$f = getenv('PSR7') === 'guzzle' ? new GuzzleHttp\Psr7\HttpFactory() : new Nyholm\Psr7\Factory\Psr17Factory();
(new Shmlink\Psr7\Worker(\$f, \$f, \$f))->run(new App(\$f));
PHP;

foreach ([['nyholm', 'workers'], ['guzzle', 'front']] as [$psr7, $httpMode]) {
    echo "== $psr7, $httpMode\n";
    putenv("PSR7=$psr7");
    $pool = PoolServer::start($script, workers: 1, args: ['--http', '127.0.0.1:0', '--http-mode', $httpMode]);
    $http = $pool->http();
    [$status, $headers, $body] = shmlink_http($http, 'POST', '/a/b?x=1&y[]=2', 'p=1&q[z]=3',
        ['Content-Type: application/x-www-form-urlencoded', 'Cookie: c1=v%201; c2=w', 'X-A: 1', 'X-A: 2']);
    echo "$status ", $headers['content-type'][0], ' ', implode(',', $headers['x-multi']), "\n$body\n";
    // Nothing of the previous request stays.
    [$status, , $body] = shmlink_http($http, 'PUT', '/raw', '{"k":1}', ['Content-Type: application/json']);
    echo "$status $body\n";
    $b = 'XyZ';
    $form = "--$b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n"
        . "--$b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"up.txt\"\r\n"
        . "Content-Type: text/plain\r\n\r\nhello file\r\n"
        . "--$b\r\nContent-Disposition: form-data; name=\"g[]\"; filename=\"two.bin\"\r\n"
        . "Content-Type: application/octet-stream\r\n\r\n\x00\x01\r\n--$b--\r\n";
    [$status, , $body] = shmlink_http($http, 'POST', '/upload', $form, ["Content-Type: multipart/form-data; boundary=$b"]);
    echo "$status $body\n";
    [$status, $headers, $body] = shmlink_http($http, 'GET', '/big');
    echo "/big: $status ", strlen($body), ' ', md5($body) === md5(str_repeat('0123456789abcdef', 131072)) ? 'intact' : 'garbled',
        ' ', $headers['transfer-encoding'][0] ?? 'whole', "\n";
    [$status, , $body] = shmlink_http($http, 'GET', '/throw');
    echo "/throw: $status ", trim($body), "\n";
    [$status, , $body] = shmlink_http($http, 'GET', '/after');
    echo "/after: $status ", json_decode($body, true)['uri'], "\n";
    // The workers' output reaches the pool's log through a pipe, a moment later.
    echo "logged: ", var_export(shmlink_wait_until(
        fn () => str_contains($pool->log(), 'uncaught DomainException: boom') ?: null, 'the log line'), true), "\n";
    echo "exit ", $pool->stop(), "\n";
}
?>
--EXPECT--
== nyholm, workers
201 application/json a,b
{"class":"Nyholm\\Psr7\\ServerRequest","method":"POST","uri":"http:\/\/127.0.0.1:PORT\/a\/b?x=1&y%5B%5D=2","protocol":"1.1","x-a":["1","2"],"query":{"x":"1","y":["2"]},"cookies":{"c1":"v 1","c2":"w"},"parsed":{"p":"1","q":{"z":"3"}},"body":"p=1&q[z]=3","files":[],"server":["POST","127.0.0.1"]}
201 {"class":"Nyholm\\Psr7\\ServerRequest","method":"PUT","uri":"http:\/\/127.0.0.1:PORT\/raw","protocol":"1.1","x-a":[],"query":[],"cookies":[],"parsed":null,"body":"{\"k\":1}","files":[],"server":["PUT","127.0.0.1"]}
201 {"class":"Nyholm\\Psr7\\ServerRequest","method":"POST","uri":"http:\/\/127.0.0.1:PORT\/upload","protocol":"1.1","x-a":[],"query":[],"cookies":[],"parsed":{"a":"1"},"body":"multipart","files":{"f":["up.txt","text\/plain",10,0,"hello file"],"g":[["two.bin","application\/octet-stream",2,0,"\u0000\u0001"]]},"server":["POST","127.0.0.1"]}
/big: 200 2097152 intact chunked
/throw: 500 Internal Server Error
/after: 201 http://127.0.0.1:PORT/after
logged: true
exit 0
== guzzle, front
201 application/json a,b
{"class":"GuzzleHttp\\Psr7\\ServerRequest","method":"POST","uri":"http:\/\/127.0.0.1:PORT\/a\/b?x=1&y%5B%5D=2","protocol":"1.1","x-a":["1","2"],"query":{"x":"1","y":["2"]},"cookies":{"c1":"v 1","c2":"w"},"parsed":{"p":"1","q":{"z":"3"}},"body":"p=1&q[z]=3","files":[],"server":["POST","127.0.0.1"]}
201 {"class":"GuzzleHttp\\Psr7\\ServerRequest","method":"PUT","uri":"http:\/\/127.0.0.1:PORT\/raw","protocol":"1.1","x-a":[],"query":[],"cookies":[],"parsed":null,"body":"{\"k\":1}","files":[],"server":["PUT","127.0.0.1"]}
201 {"class":"GuzzleHttp\\Psr7\\ServerRequest","method":"POST","uri":"http:\/\/127.0.0.1:PORT\/upload","protocol":"1.1","x-a":[],"query":[],"cookies":[],"parsed":{"a":"1"},"body":"multipart","files":{"f":["up.txt","text\/plain",10,0,"hello file"],"g":[["two.bin","application\/octet-stream",2,0,"\u0000\u0001"]]},"server":["POST","127.0.0.1"]}
/big: 200 2097152 intact whole
/throw: 500 Internal Server Error
/after: 201 http://127.0.0.1:PORT/after
logged: true
exit 0