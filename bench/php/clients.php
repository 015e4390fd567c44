<?php
/* The baseline clients of bench/php/bench.php: what a PHP user would write
 * instead of using shmlink. Each has call(string): string and close(). */

declare(strict_types=1);

/**
 * A client of the raw baseline: PHP's sockets extension, each message
 * framed by its length as a 4-byte little-endian integer.
 */
final class RawClient
{
    private Socket $socket;

    public function __construct(string $kind, string $target)
    {
        if ($kind === 'unix') {
            $s = socket_create(AF_UNIX, SOCK_STREAM, 0);
            $ok = $s !== false && @socket_connect($s, $target);
        } else {
            $colon = strrpos($target, ':');
            [$host, $port] = [trim(substr($target, 0, (int)$colon), '[]'), (int)substr($target, (int)$colon + 1)];
            $s = socket_create(str_contains($host, ':') ? AF_INET6 : AF_INET, SOCK_STREAM, SOL_TCP);
            $ok = $s !== false && socket_set_option($s, SOL_TCP, TCP_NODELAY, 1) && @socket_connect($s, $host, $port);
        }
        if (!$ok) {
            throw new RuntimeException("cannot connect to raw $kind:$target: "
                . socket_strerror($s === false ? socket_last_error() : socket_last_error($s)));
        }
        $this->socket = $s;
    }

    public function call(string $request): string
    {
        $frame = pack('V', strlen($request)) . $request;
        $len = strlen($frame);
        for ($off = 0; $off < $len; $off += $n) {
            $n = socket_write($this->socket, $off === 0 ? $frame : substr($frame, $off));
            if ($n === false || $n === 0) {
                throw new RuntimeException('raw write: ' . socket_strerror(socket_last_error($this->socket)));
            }
        }
        $n = unpack('V', $this->read(4))[1];
        return $n === 0 ? '' : $this->read($n);
    }

    private function read(int $len): string
    {
        $buf = '';
        while (($missing = $len - strlen($buf)) > 0) {
            $got = socket_recv($this->socket, $chunk, $missing, MSG_WAITALL);
            if ($got === false || $got === 0) {
                throw new RuntimeException('raw read: '
                    . ($got === 0 ? 'connection closed' : socket_strerror(socket_last_error($this->socket))));
            }
            $buf .= $chunk;
        }
        return $buf;
    }

    public function close(): void
    {
        socket_close($this->socket);
    }
}

/**
 * A Redis broker round trip (the phpredis extension): RPUSH the request on
 * the list `shmlink:req`, BLPOP the reply from a list of this client's own;
 * bench/redis/worker.php does the work in between. A request is: the reply
 * list's name length (2 bytes, big-endian), the name, the payload.
 */
final class RedisBrokerClient
{
    private static int $clients = 0;
    private Redis $redis;
    private string $header;
    private string $replyKey;

    public function __construct(string $target, private float $timeout = 5.0)
    {
        $colon = strrpos($target, ':');
        [$host, $port] = [trim(substr($target, 0, (int)$colon), '[]'), (int)substr($target, (int)$colon + 1)];
        $this->redis = new Redis();
        try {
            $this->redis->connect($host, $port, $timeout);
        } catch (RedisException $e) {
            throw new RuntimeException("cannot connect to redis at $target: {$e->getMessage()}");
        }
        $this->replyKey = sprintf('shmlink:rep:%d:%d', getmypid(), ++self::$clients);
        $this->header = pack('n', strlen($this->replyKey)) . $this->replyKey;
    }

    public function call(string $request): string
    {
        $this->redis->rPush('shmlink:req', $this->header . $request);
        $reply = $this->redis->blPop([$this->replyKey], (int)ceil($this->timeout));
        if (!is_array($reply) || count($reply) !== 2) {
            throw new RuntimeException("no reply through redis within {$this->timeout} s (is bench/redis/worker.php running?)");
        }
        return $reply[1];
    }

    public function close(): void
    {
        $this->redis->close();
    }
}
