--TEST--
Server::serve() stopped by a pcntl SIGTERM handler calling stop(); calls in flight are still answered
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

// Both servers are forked before any client exists (a child inherits nothing).
$idle = PhpServer::start(fn ($r) => $r, function (Shmlink\Server $s) {
    pcntl_async_signals(true);
    pcntl_signal(SIGTERM, fn () => $s->stop());
});
$dir = shmlink_test_dir();
$server = PhpServer::start(
    function (string $request) use ($dir) {
        if ($request === 'slow') {
            touch("$dir/handling");
            usleep(500000);
        }
        return "served $request";
    },
    function (Shmlink\Server $s) {
        pcntl_async_signals(true);
        pcntl_signal(SIGTERM, fn () => $s->stop());
    },
    dir: $dir
);
$clients = [];
foreach (['shm', 'unix', 'tcp'] as $t) {
    $clients[$t] = new Shmlink\Client($server->addresses[$t]);
    echo "$t: ", $clients[$t]->call($t), "\n";
}
// A call in flight when SIGTERM comes is still answered.
$id = $clients['unix']->send('slow');
shmlink_wait_file("$dir/handling", 'the handler');
$server->signal(SIGTERM);
echo "in flight: ", $clients['unix']->receive($got, 10.0), "\n";
echo "server: ", $server->wait(), ", serve() ", $server->result(), "\n";
echo "socket files removed: ", var_export(!file_exists("$dir/php-shm.sock") && !file_exists("$dir/php-unix.sock"), true), "\n";
echo "after stop: ", shmlink_throws(fn () => $clients['shm']->call('x', 2.0)), "\n";
echo "connect: ", shmlink_throws(fn () => new Shmlink\Client($server->addresses['unix'])), "\n";

// The idle server: the signal handler runs while serve() waits.
$idle->signal(SIGTERM);
echo "idle server: ", $idle->wait(), ", serve() ", $idle->result(), "\n";
?>
--EXPECTF--
shm: served shm
unix: served unix
tcp: served tcp
in flight: served slow
server: exit 0, serve() returned
socket files removed: true
after stop: Shmlink\ClosedException: %s
connect: Shmlink\ConnectException: cannot connect to unix:%s
idle server: exit 0, serve() returned
