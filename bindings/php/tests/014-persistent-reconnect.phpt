--TEST--
Persistent sessions after the server restarted: replaced once by a fresh connect, before anything is sent
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';

function show(string $what): void
{
    $s = Shmlink\stats();
    echo str_pad($what, 26), " connects={$s['connects']} reuses={$s['persistent_reuses']}",
        " reconnects={$s['reconnects']} sessions={$s['persistent_sessions']}\n";
}

$dir = shmlink_test_dir();
$echo = EchoServer::start(['--reply-ratio', '1'], $dir);
$addresses = $echo->addresses;
$old = [];
foreach ($addresses as $t => $a) {
    $old[$t] = new Shmlink\Client($a, ['persistent' => true]);
    echo "$t: ", $old[$t]->call("first $t"), "\n";
}
show('first server');
echo "server stopped: exit ", $echo->stop(), "\n";
$echo = EchoServer::start(['--reply-ratio', '1'], $dir, $addresses['tcp']);
echo "restarted on the same addresses: ", var_export($echo->addresses === $addresses, true), "\n";

foreach ($addresses as $t => $a) {
    echo "$t: old object connected=", var_export($old[$t]->isConnected(), true);
    $new = new Shmlink\Client($a, ['persistent' => true]);
    echo ", new object: ", $new->call("second $t"), "\n";
    echo "  old object: ", shmlink_throws(fn () => $old[$t]->call('x')), "\n";
}
show('after the restart');
unset($old, $new);
foreach ($addresses as $t => $a) {
    (new Shmlink\Client($a, ['persistent' => true]))->call('reuse');
}
show('reused');

// Gone for good: the reconnect fails once with ConnectException, the dead
// session leaves the table.
$echo->stop(9);
echo shmlink_throws(fn () => new Shmlink\Client($addresses['unix'], ['persistent' => true])), "\n";
show('server gone');
?>
--EXPECTF--
shm: first shm
unix: first unix
tcp: first tcp
first server               connects=3 reuses=0 reconnects=0 sessions=3
server stopped: exit 0
restarted on the same addresses: true
shm: old object connected=false, new object: second shm
  old object: Shmlink\ClosedException: %s
unix: old object connected=false, new object: second unix
  old object: Shmlink\ClosedException: %s
tcp: old object connected=false, new object: second tcp
  old object: Shmlink\ClosedException: %s
after the restart          connects=6 reuses=0 reconnects=3 sessions=3
reused                     connects=6 reuses=3 reconnects=3 sessions=3
Shmlink\ConnectException: cannot connect to unix:%s/unix.sock: %s
server gone                connects=6 reuses=3 reconnects=3 sessions=2
