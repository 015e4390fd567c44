--TEST--
send()/receive() with ids and several calls in flight; call() between them; notify()
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';

$echo = EchoServer::start(['--reply-ratio', '1']);
foreach (['shm', 'unix', 'tcp'] as $t) {
    $c = new Shmlink\Client($echo->addresses[$t]);
    $sent = [];
    for ($i = 0; $i < 20; $i++) {
        $sent[$c->send("req-$i")] = "req-$i";
    }
    $ids = array_keys($sent);
    $sorted = $ids;
    sort($sorted);
    $increasing = $ids === $sorted && count(array_unique($ids)) === 20;
    // A call in the middle: its response is picked out, the others stay queued.
    $mid = $c->call('middle');
    $got = [];
    for ($i = 0; $i < 20; $i++) {
        $r = $c->receive($id, 5.0);
        $got[$id] = $r;
    }
    $noId = $c->send('no id wanted');
    $plain = $c->receive();
    $c->notify('one-way');
    $after = $c->call('after notify');
    echo "$t: ids increasing=", var_export($increasing, true),
        " responses match=", var_export($got === $sent, true),
        " middle=$mid plain=$plain after=$after\n";
    echo "  ", shmlink_throws(fn () => $c->receive($id, 0.2)), "\n";
}
?>
--EXPECTF--
shm: ids increasing=true responses match=true middle=middle plain=no id wanted after=after notify
  Shmlink\Exception: recv on the session with %s: no call is in flight
unix: ids increasing=true responses match=true middle=middle plain=no id wanted after=after notify
  Shmlink\Exception: recv on the session with %s: no call is in flight
tcp: ids increasing=true responses match=true middle=middle plain=no id wanted after=after notify
  Shmlink\Exception: recv on the session with %s: no call is in flight
