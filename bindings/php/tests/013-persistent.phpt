--TEST--
Persistent sessions: reuse without a handshake, keys by options, calls in flight, close()
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';

function show(string $what): void
{
    $s = Shmlink\stats();
    echo str_pad($what, 34), " connects={$s['connects']} reuses={$s['persistent_reuses']}",
        " reconnects={$s['reconnects']} sessions={$s['persistent_sessions']}\n";
}

$echo = EchoServer::start(['--reply-ratio', '1']);
foreach (['shm', 'unix', 'tcp'] as $t) {
    $a = new Shmlink\Client($echo->addresses[$t], ['persistent' => true]);
    $b = new Shmlink\Client($echo->addresses[$t], ['persistent' => true]);
    echo "$t: ", $a->call('a'), $b->call('b'), "\n";
}
show('two clients per transport');

// Same address, other options: another session. Equal settings spelled
// differently ("spin" is the default wait, 5.0 the default timeout): the same.
$u = $echo->addresses['unix'];
$c = new Shmlink\Client($u, ['persistent' => true, 'timeout' => 2.0]);
$d = new Shmlink\Client($u, ['persistent' => true, 'timeout' => 5.0, 'wait' => 'spin']);
show('other options, equal defaults');

// A non-persistent client never touches the table.
$n = new Shmlink\Client($u);
show('non-persistent');

// Objects gone: the sessions stay for the next request of this process.
unset($a, $b, $c, $d, $n);
$e = new Shmlink\Client($u, ['persistent' => true]);
echo "after unset: ", $e->call('still there'), "\n";
show('reused after unset');

// Pipelining in one object: a new Client gets a fresh session instead.
$id = $e->send('pending');
$f = new Shmlink\Client($u, ['persistent' => true]);
show('calls in flight in another object');
echo "f: ", $f->call('f'), ", e receives its own: ", $e->receive($got), ", id ok: ", var_export($got === $id, true), "\n";

// An object dropped with responses pending: its session is not reused.
$g = new Shmlink\Client($echo->addresses['tcp'], ['persistent' => true, 'timeout' => 3.0]);
$g->send('never received');
unset($g);
show('dropped with a call pending');
$g = new Shmlink\Client($echo->addresses['tcp'], ['persistent' => true, 'timeout' => 3.0]);
echo "g: ", $g->call('fresh'), "\n";
show('fresh session instead');

// close() drops the session from the table and closes it for every sharer.
$h = new Shmlink\Client($echo->addresses['shm'], ['persistent' => true]);
$i = new Shmlink\Client($echo->addresses['shm'], ['persistent' => true]);
$h->close();
show('closed one');
echo "h: ", shmlink_throws(fn () => $h->call('x')), "\n";
echo "i: ", shmlink_throws(fn () => $i->call('x')), "\n";
$j = new Shmlink\Client($echo->addresses['shm'], ['persistent' => true]);
echo "j: ", $j->call('new one'), "\n";
show('after close');
?>
--EXPECTF--
shm: ab
unix: ab
tcp: ab
two clients per transport          connects=3 reuses=3 reconnects=0 sessions=3
other options, equal defaults      connects=4 reuses=4 reconnects=0 sessions=4
non-persistent                     connects=5 reuses=4 reconnects=0 sessions=4
after unset: still there
reused after unset                 connects=5 reuses=5 reconnects=0 sessions=4
calls in flight in another object  connects=6 reuses=5 reconnects=0 sessions=4
f: f, e receives its own: pending, id ok: true
dropped with a call pending        connects=7 reuses=5 reconnects=0 sessions=4
g: fresh
fresh session instead              connects=8 reuses=5 reconnects=0 sessions=5
closed one                         connects=8 reuses=7 reconnects=0 sessions=4
h: Shmlink\ClosedException: client of shm:%s/shm.sock was closed with Shmlink\Client::close()
i: Shmlink\ClosedException: client of shm:%s/shm.sock was closed with Shmlink\Client::close() on another object sharing its persistent session
j: new one
after close                        connects=9 reuses=7 reconnects=0 sessions=5
