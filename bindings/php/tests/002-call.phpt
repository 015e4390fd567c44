--TEST--
call() on shm, unix and tcp: transport(), echo replies, empty and binary requests, messages larger than the ring
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';

$echo = EchoServer::start(['--reply-ratio', '1']);
$short = EchoServer::start(); // default ratio 0.125
foreach (['shm', 'unix', 'tcp'] as $t) {
    $c = new Shmlink\Client($echo->addresses[$t]);
    $ok = $c->call('hello') === 'hello'
        && $c->call('') === ''
        && $c->call("a\0b\xff") === "a\0b\xff";
    $big = random_bytes(1 << 20); // streams through the 64 KiB ring
    $ok = $ok && $c->call($big) === $big;
    $ok = $ok && $c->call('x', 2.5) === 'x';
    $s = new Shmlink\Client($short->addresses[$t]);
    $ok = $ok && $s->call(str_repeat('abcdefgh', 4)) === 'abcd' && $s->call('123456789') === '12';
    echo "$t: ", $ok ? 'ok' : 'FAIL', ", connected=", var_export($c->isConnected(), true),
        ", transport=", $c->transport(), "\n";
}
foreach (['sleep', 'spin', 'busy'] as $w) {
    $c = new Shmlink\Client($echo->addresses['shm'], ['wait' => $w, 'ring_size' => 4096, 'timeout' => 10]);
    $m = str_repeat("$w.", 30000); // 150 KB through a 4 KiB ring
    echo "wait $w: ", $c->call($m) === $m ? 'ok' : 'FAIL', "\n";
}
$st = Shmlink\stats();
echo "connects={$st['connects']} calls={$st['calls']} errors={$st['errors']}\n";
?>
--EXPECT--
shm: ok, connected=true, transport=shm
unix: ok, connected=true, transport=unix
tcp: ok, connected=true, transport=tcp
wait sleep: ok
wait spin: ok
wait busy: ok
connects=9 calls=24 errors=0
