--TEST--
The server killed (SIGKILL) while a call is in flight: ClosedException well within the timeout
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

// Every server is forked before any client exists (a child inherits nothing).
function slow_server(string $dir): PhpServer
{
    return PhpServer::start(function (string $request) use ($dir) {
        if ($request === 'slow') {
            touch("$dir/handling");
            usleep(20000000);
        }
        return $request;
    }, dir: $dir);
}
$servers = [];
foreach (['shm', 'unix', 'tcp', 'pipelined'] as $t) {
    $servers[$t] = slow_server(shmlink_test_dir());
}

foreach (['shm', 'unix', 'tcp'] as $t) {
    $server = $servers[$t];
    $c = new Shmlink\Client($server->addresses[$t], ['timeout' => 10.0]);
    echo "$t: ", $c->call('ping'), "\n";

    // Blocked in call(): a helper process kills the server once the handler runs.
    $killer = proc_open(['sh', '-c', 'i=0; while [ ! -e "$1/handling" ] && [ $i -lt 2000 ]; do sleep 0.01; i=$((i+1)); done; kill -KILL "$2"',
                         'killer', $server->dir, (string)$server->pid], [], $pipes);
    $t0 = hrtime(true);
    echo "  call: ", shmlink_throws(fn () => $c->call('slow')), "\n";
    $s = (hrtime(true) - $t0) / 1e9;
    echo "  within the timeout: ", var_export($s < 8.0, true), "\n";
    proc_close($killer);
    echo "  server: ", $server->wait(), "\n";
    echo "  connected: ", var_export($c->isConnected(), true), "\n";
    echo "  next call: ", shmlink_throws(fn () => $c->call('again')), "\n";
}

// Pipelined: the server dies with a sent call pending; receive() fails at once.
$server = $servers['pipelined'];
$c = new Shmlink\Client($server->addresses['shm'], ['timeout' => 10.0]);
$c->send('slow');
shmlink_wait_file("$server->dir/handling", 'the handler');
$server->signal(9);
echo "pipelined: server ", $server->wait(), "\n";
$t0 = hrtime(true);
echo "  receive: ", shmlink_throws(fn () => $c->receive($id)), "\n";
echo "  within the timeout: ", var_export((hrtime(true) - $t0) / 1e9 < 8.0, true), "\n";
?>
--EXPECTF--
shm: ping
  call: Shmlink\ClosedException: %s
  within the timeout: true
  server: signal 9
  connected: false
  next call: Shmlink\ClosedException: %s
unix: ping
  call: Shmlink\ClosedException: %s
  within the timeout: true
  server: signal 9
  connected: false
  next call: Shmlink\ClosedException: %s
tcp: ping
  call: Shmlink\ClosedException: %s
  within the timeout: true
  server: signal 9
  connected: false
  next call: Shmlink\ClosedException: %s
pipelined: server signal 9
  receive: Shmlink\ClosedException: %s
  within the timeout: true
