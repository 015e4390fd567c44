--TEST--
Streamed HTTP responses from a worker: flush() in a classic script (an SSE endpoint's first event reaches the client while the handler still runs), Shmlink\Worker::stream()/write()/end(), HTTP/1.0 (to the connection's end), keep-alive after a stream, a client that leaves mid-stream (the handler's write throws, the worker serves on); under the pool's front the pieces arrive whole
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

$script = <<<'PHP'
<?php
$mark = getenv('MARK_DIR');
$w = new Shmlink\Worker();
$w->run(function (Shmlink\HttpRequest $req) use (&$w, $mark) {
    switch ($req->path) {
        case '/sse':
            // A classic script: header(), echo, flush().
            header('Content-Type: text/event-stream');
            header('Cache-Control: no-cache');
            ob_start();
            echo "data: first\n\n";
            flush();
            // Goes on only once the client has the first event.
            $t = microtime(true) + 10;
            while (!file_exists("$mark/go") && microtime(true) < $t) {
                time_nanosleep(0, 1000000);
            }
            echo "data: second\n\n";
            flush();
            echo "data: last\n\n";
            return ob_get_clean();
        case '/api':
            $w->stream(new Shmlink\HttpResponse(201, 'one,', ['X-Streamed' => 'yes']));
            $w->write('two,');
            $w->write('');
            $w->write('three');
            $w->end();
            return;
        case '/returns':
            $w->stream('a');
            $w->write('b');
            return new Shmlink\HttpResponse(200, 'c');
        case '/endless':
            $w->stream(new Shmlink\HttpResponse(200, '', ['Content-Type' => 'application/octet-stream']));
            $piece = str_repeat('x', 65536);
            try {
                for ($i = 0; $i < 100000; $i++) {
                    $w->write($piece);
                }
                file_put_contents("$mark/endless", "wrote everything\n");
            } catch (Shmlink\Exception $e) {
                file_put_contents("$mark/endless", get_class($e) . ': ' . $e->getMessage() . "\n");
            }
            return;
    }
    return 'plain ' . $req->path;
});
PHP;

/* A raw client: the head, then the body piece by piece. */
final class Raw
{
    public $s;
    public string $buf = '';

    public function __construct(string $address)
    {
        $this->s = stream_socket_client("tcp://$address", $errno, $errstr, 10);
        stream_set_timeout($this->s, 10);
    }

    public function send(string $bytes): void
    {
        fwrite($this->s, $bytes);
    }

    private function fill(): bool
    {
        $more = fread($this->s, 65536);
        if ($more === '' || $more === false) {
            return false;
        }
        $this->buf .= $more;
        return true;
    }

    public function head(): array
    {
        while (($i = strpos($this->buf, "\r\n\r\n")) === false) {
            if (!$this->fill()) {
                throw new RuntimeException('closed before a head: ' . $this->buf);
            }
        }
        $lines = explode("\r\n", substr($this->buf, 0, $i));
        $this->buf = substr($this->buf, $i + 4);
        $status = array_shift($lines);
        $h = [];
        foreach ($lines as $l) {
            [$n, $v] = explode(':', $l, 2);
            $h[strtolower($n)] = trim($v);
        }
        return [$status, $h];
    }

    /** The next chunk's data ('' for the last chunk). */
    public function chunk(): string
    {
        while (($i = strpos($this->buf, "\r\n")) === false) {
            if (!$this->fill()) {
                throw new RuntimeException('closed mid-body');
            }
        }
        $n = hexdec(substr($this->buf, 0, $i));
        while (strlen($this->buf) < $i + 2 + $n + 2) {
            if (!$this->fill()) {
                throw new RuntimeException('closed mid-chunk');
            }
        }
        $data = substr($this->buf, $i + 2, $n);
        $this->buf = substr($this->buf, $i + 2 + $n + 2);
        return $data;
    }

    public function chunks(): array
    {
        $all = [];
        while (($c = $this->chunk()) !== '') {
            $all[] = $c;
        }
        return $all;
    }

    public function rest(): string
    {
        while ($this->fill()) {
        }
        return $this->buf;
    }
}

$mark = shmlink_test_dir();
putenv("MARK_DIR=$mark");

echo "== workers serve HTTP\n";
$pool = PoolServer::start($script, workers: 1, args: ['--http', '127.0.0.1:0']);
$http = $pool->http();

// SSE: the first event arrives while the handler waits for the client.
$c = new Raw($http);
$c->send("GET /sse HTTP/1.1\r\nHost: t\r\n\r\n");
[$status, $h] = $c->head();
echo "$status | {$h['content-type']} | {$h['transfer-encoding']} | ", isset($h['content-length']) ? 'length' : 'no length', "\n";
echo json_encode($c->chunk()), " (while the handler runs)\n";
touch("$mark/go");
echo json_encode($c->chunks()), "\n";

// The same connection goes on: stream()/write()/end(), keep-alive.
$c->send("GET /api HTTP/1.1\r\nHost: t\r\n\r\n");
[$status, $h] = $c->head();
echo "$status | x-streamed: {$h['x-streamed']} | ", json_encode($c->chunks()), "\n";
$c->send("GET /returns HTTP/1.1\r\nHost: t\r\n\r\n");
[$status] = $c->head();
echo "$status | ", json_encode($c->chunks()), "\n";
$c->send("GET /after HTTP/1.1\r\nHost: t\r\n\r\n");
[$status, $h] = $c->head();
echo "$status | ", substr($c->buf, 0, (int)$h['content-length']), "\n";

// HTTP/1.0: no chunks, the body runs to the connection's end.
$c = new Raw($http);
$c->send("GET /api HTTP/1.0\r\n\r\n");
[$status, $h] = $c->head();
echo "$status | ", $h['connection'] ?? '-', ' | ', $h['transfer-encoding'] ?? 'no chunks', ' | ', $c->rest(), "\n";

// A client that leaves mid-stream: the handler's write throws; the worker
// serves the next request.
$c = new Raw($http);
$c->send("GET /endless HTTP/1.1\r\nHost: t\r\n\r\n");
[$status] = $c->head();
$c->chunk();
fclose($c->s);
shmlink_wait_file("$mark/endless", 'the endless handler to stop');
echo file_get_contents("$mark/endless");
[$status, , $body] = shmlink_http($http, 'GET', '/next');
echo "$status $body\n";
$pool->stop();

echo "== the pool's front\n";
@unlink("$mark/go");
touch("$mark/go"); // a front gathers the pieces: nothing to wait for
$pool = PoolServer::start($script, workers: 1, args: ['--http', '127.0.0.1:0', '--http-mode', 'front']);
[$status, $h, $body] = shmlink_http($pool->http(), 'GET', '/sse');
echo "$status | {$h['content-type'][0]} | {$h['content-length'][0]} | ", json_encode($body), "\n";
[$status, $h, $body] = shmlink_http($pool->http(), 'GET', '/api');
echo "$status | {$h['x-streamed'][0]} | $body\n";
$pool->stop();
?>
--EXPECT--
== workers serve HTTP
HTTP/1.1 200 OK | text/event-stream;charset=UTF-8 | chunked | no length
"data: first\n\n" (while the handler runs)
["data: second\n\n","data: last\n\n"]
HTTP/1.1 201 Created | x-streamed: yes | ["one,","two,","three"]
HTTP/1.1 200 OK | ["a","b","c"]
HTTP/1.1 200 OK | plain /after
HTTP/1.0 201 Created | close | no chunks | one,two,three
Shmlink\Exception: the HTTP client closed the connection: broken pipe
200 plain /next
== the pool's front
200 | text/event-stream;charset=UTF-8 | 39 | "data: first\n\ndata: second\n\ndata: last\n\n"
201 | yes | one,two,three
