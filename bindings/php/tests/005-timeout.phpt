--TEST--
Timeouts: TimeoutException within the timeout; a late reply is never returned to the next call
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

$server = PhpServer::start(function (string $request) {
    if (str_starts_with($request, 'slow')) {
        usleep(600000);
        return "late reply to $request";
    }
    return "reply to $request";
});
foreach (['shm', 'unix', 'tcp'] as $t) {
    $c = new Shmlink\Client($server->addresses[$t], ['timeout' => 10.0]);
    $t0 = hrtime(true);
    echo "$t: ", shmlink_throws(fn () => $c->call('slow-1', 0.15)), "\n";
    $ms = (hrtime(true) - $t0) / 1e6;
    echo "  waited at least the timeout: ", var_export($ms >= 140, true),
        ", not much more: ", var_export($ms < 2000, true), "\n";
    // The server is still busy with slow-1; this waits for it, then gets its own reply.
    echo "  next call: ", $c->call('fast'), "\n";
    // receive() with a timeout, then the response arrives for a later receive.
    $id = $c->send('slow-2');
    echo "  ", shmlink_throws(fn () => $c->receive($got, 0.1)), "\n";
    echo "  later receive: ", $c->receive($got, 5.0), ", same id: ", var_export($got === $id, true), "\n";
    // A client-wide timeout from the options.
    $short = new Shmlink\Client($server->addresses[$t], ['timeout' => 0.1]);
    echo "  option timeout: ", shmlink_throws(fn () => $short->call('slow-3')), "\n";
    echo "  still usable: ", $short->call('fast', 5), "\n";
}
?>
--EXPECTF--
shm: Shmlink\TimeoutException: waiting for a response on shm:%s timed out after %fms
  waited at least the timeout: true, not much more: true
  next call: reply to fast
  Shmlink\TimeoutException: waiting for a response on shm:%s timed out after %fms
  later receive: late reply to slow-2, same id: true
  option timeout: Shmlink\TimeoutException: waiting for a response on shm:%s timed out after %fms
  still usable: reply to fast
unix: Shmlink\TimeoutException: waiting for a response on unix:%s timed out after %fms
  waited at least the timeout: true, not much more: true
  next call: reply to fast
  Shmlink\TimeoutException: waiting for a response on unix:%s timed out after %fms
  later receive: late reply to slow-2, same id: true
  option timeout: Shmlink\TimeoutException: waiting for a response on unix:%s timed out after %fms
  still usable: reply to fast
tcp: Shmlink\TimeoutException: waiting for a response on tcp:%s timed out after %fms
  waited at least the timeout: true, not much more: true
  next call: reply to fast
  Shmlink\TimeoutException: waiting for a response on tcp:%s timed out after %fms
  later receive: late reply to slow-2, same id: true
  option timeout: Shmlink\TimeoutException: waiting for a response on tcp:%s timed out after %fms
  still usable: reply to fast
