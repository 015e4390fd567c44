--TEST--
Server::stop() from inside the handler, stop() before serve(), serve() twice, exit() and a fatal error in the handler
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

// The servers are forked before any client exists (a child inherits nothing).
$stopping = PhpServer::start(function (string $request, Shmlink\Server $s) {
    if ($request === 'stop') {
        $s->stop();
        return 'stopping';
    }
    return "served $request";
});
$exiting = PhpServer::start(function (string $request) {
    if ($request === 'exit') {
        exit(3);
    }
    return $request;
});
$failing = PhpServer::start(function (string $request) {
    if ($request === 'fatal') {
        // A fatal error on every PHP, at once and under valgrind too: a
        // function declared twice (E_COMPILE_ERROR). Not E_USER_ERROR
        // (deprecated since 8.4), not an exhausted memory_limit
        // (USE_ZEND_ALLOC=0 lifts it under valgrind), not max_execution_time
        // (valgrind delivers its SIGPROF 1 to 50 s late).
        eval('function shmlink_twice() {} function shmlink_twice() {}');
    }
    return $request;
});

// stop() inside the handler: this request is answered, then serve() returns.
$server = $stopping;
$c = new Shmlink\Client($server->addresses['shm']);
echo $c->call('a'), "\n";
echo $c->call('stop'), "\n";
echo "server: ", $server->wait(), ", serve() ", $server->result(), "\n";

// exit() in the handler: the caller gets an error, the child exits.
$server = $exiting;
$c = new Shmlink\Client($server->addresses['unix']);
try {
    $c->call('exit');
} catch (Shmlink\RemoteException $e) {
    printf("exit: code 0x%X: %s\n", $e->getCode(), $e->getMessage());
}
echo "server: ", $server->wait(), ", result file: ", var_export($server->result(), true), "\n";

// A fatal error in the handler: the caller gets an error, nothing hangs.
$server = $failing;
$c = new Shmlink\Client($server->addresses['tcp']);
try {
    $c->call('fatal');
} catch (Shmlink\RemoteException $e) {
    printf("fatal: code 0x%X: %s\n", $e->getCode(), $e->getMessage());
}
echo "server: ", $server->wait(), " (killed itself after the fatal error)\n";

// In this process: stop() before serve() makes serve() return at once.
$dir = shmlink_test_dir();
$s = new Shmlink\Server("unix:$dir/local.sock");
$s->stop();
$t0 = hrtime(true);
$s->serve(fn ($r) => $r);
echo "stopped before serve: returned, quickly=", var_export((hrtime(true) - $t0) / 1e9 < 5, true), "\n";
echo "serve again: ", shmlink_throws(fn () => $s->serve(fn ($r) => $r)), "\n";
echo "addresses still readable: ", implode(',', $s->addresses()) === "unix:$dir/local.sock" ? 'yes' : 'no', "\n";
unset($s);
echo "rebind the same path: ", count((new Shmlink\Server("unix:$dir/local.sock"))->addresses()), "\n";
?>
--EXPECTF--
served a
stopping
server: exit 0, serve() returned
exit: code 0xFFFF0100: remote error 4294902016: the PHP server exited
server: exit 3, result file: NULL

Fatal error: Cannot redeclare %s (previously declared in %s) in %s on line %d
fatal: code 0xFFFF0100: remote error 4294902016: the PHP server stopped before answering this request
server: signal 9 (killed itself after the fatal error)
stopped before serve: returned, quickly=true
serve again: Shmlink\Exception: Shmlink\Server::serve() was already called on this server
addresses still readable: yes
rebind the same path: 1
