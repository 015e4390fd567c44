--TEST--
The server killed (SIGKILL) while answers are awaited through stream(): the streams become readable and tryReceive() throws ClosedException (shm, unix, tcp, and fibers on examples/fiber-loop.php)
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';
require dirname(__DIR__) . '/examples/fiber-loop.php';

/** Whether each stream is readable now ($seconds 0) or becomes so within $seconds. */
function readable(array $streams, float $seconds): array
{
    $out = [];
    $deadline = hrtime(true) + (int)($seconds * 1e9);
    foreach ($streams as $t => $s) {
        $read = [$s];
        $write = $except = null;
        $left = max(0, $deadline - hrtime(true));
        $out[$t] = stream_select($read, $write, $except, intdiv($left, 1000000000), intdiv($left % 1000000000, 1000)) === 1;
    }
    return $out;
}

$echo = EchoServer::start(['--reply-ratio', '1']);
$clients = $streams = [];
foreach (['shm', 'unix', 'tcp'] as $t) {
    $clients[$t] = new Shmlink\Client($echo->addresses[$t], ['timeout' => 10.0]);
    $streams[$t] = $clients[$t]->stream();
    echo "$t: ", $clients[$t]->call('ping'), "\n";
}
$fiberClient = new Shmlink\Client($echo->addresses['shm'], ['timeout' => 10.0]);
$loop = new Shmlink\Examples\FiberLoop($fiberClient);

// Stopped, the server answers nothing: the calls wait, the streams stay quiet.
$echo->pause();
foreach ($clients as $t => $c) {
    $c->send("waits on $t");
    echo "$t: tryReceive: ", var_export($c->tryReceive(), true), "\n";
}
$failed = [];
for ($i = 0; $i < 5; $i++) {
    $loop->spawn(function () use ($loop, $i, &$failed) {
        try {
            $loop->call("fiber $i");
        } catch (Shmlink\Exception $e) {
            $failed[$i] = get_class($e);
        }
    });
}
echo "readable while stopped: ", json_encode(readable($streams, 0)), "\n";

// Killed: every stream becomes readable, well before the clients' 10 s timeout.
echo "server: ", $echo->stop(9), "\n";
$t0 = hrtime(true);
echo "readable after the kill: ", json_encode(readable($streams, 8.0)), "\n";
foreach ($clients as $t => $c) {
    echo "$t: tryReceive: ", shmlink_throws(fn () => $c->tryReceive()), "\n";
    echo "  connected: ", var_export($c->isConnected(), true),
        ", call: ", shmlink_throws(fn () => $c->call('again')), "\n";
}
$loop->run(8.0);
echo "fibers: ", json_encode($failed), "\n";
echo "within the timeout: ", var_export((hrtime(true) - $t0) / 1e9 < 8.0, true), "\n";
?>
--EXPECTF--
shm: ping
unix: ping
tcp: ping
shm: tryReceive: NULL
unix: tryReceive: NULL
tcp: tryReceive: NULL
readable while stopped: {"shm":false,"unix":false,"tcp":false}
server: 137
readable after the kill: {"shm":true,"unix":true,"tcp":true}
shm: tryReceive: Shmlink\ClosedException: %s
  connected: false, call: Shmlink\ClosedException: %s
unix: tryReceive: Shmlink\ClosedException: %s
  connected: false, call: Shmlink\ClosedException: %s
tcp: tryReceive: Shmlink\ClosedException: %s
  connected: false, call: Shmlink\ClosedException: %s
fibers: ["Shmlink\\ClosedException","Shmlink\\ClosedException","Shmlink\\ClosedException","Shmlink\\ClosedException","Shmlink\\ClosedException"]
within the timeout: true
