--TEST--
Shmlink\Worker under a real shmlink pool: run() with a callable, exceptions and bad results as remote errors, the accept/respond/fail loop, run() returns when the pool stops
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';

$pool = PoolServer::start(<<<'PHP'
<?php
$w = new Shmlink\Worker();
$w->run(function (string $request): mixed {
    return match ($request) {
        'pid' => (string)getmypid(),
        'throw' => throw new DomainException('asked to throw', 7),
        'throw0' => throw new LogicException('no code'),
        'int' => 42,
        default => "php:$request",
    };
});
file_put_contents(__DIR__ . '/stopped-' . getmypid(), 'run returned');
PHP);

foreach ($pool->addresses as $t => $address) {
    $c = new Shmlink\Client($address);
    echo "$t: ", $c->call('hello'), "\n";
    echo "  big: ", strlen($c->call(str_repeat('x', 3 << 20))), "\n";
    try {
        $c->call('throw');
    } catch (Shmlink\RemoteException $e) {
        echo "  throw: ", $e->getCode(), " ", $e->getMessage(), "\n";
    }
    try {
        $c->call('throw0');
    } catch (Shmlink\RemoteException $e) {
        printf("  throw0: 0x%x %s\n", $e->getCode(), $e->getMessage());
    }
    try {
        $c->call('int');
    } catch (Shmlink\RemoteException $e) {
        printf("  int: 0x%x %s\n", $e->getCode(), $e->getMessage());
    }
    echo "  after: ", $c->call('again'), "\n";
}
$pids = array_column($pool->status()['workers'], 'pid');
echo "pool stopped: ", $pool->stop(), "\n";
foreach ($pids as $pid) {
    if (!file_exists("$pool->dir/stopped-$pid")) {
        echo "worker $pid: run() did not return\n";
    }
}
echo "every run() returned\n";
echo "warning logged: ", var_export(str_contains($pool->log(), 'the handler returned int, expected string'), true), "\n";

// The same by hand: accept(), respond(), fail().
$pool = PoolServer::start(<<<'PHP'
<?php
$w = new Shmlink\Worker();
while (($request = $w->accept()) !== null) {
    if ($request === 'fail') {
        $w->fail(99, 'failed by hand');
    } else {
        $w->respond(strrev($request));
    }
}
PHP, workers: 1);
$c = new Shmlink\Client($pool->addresses['shm']);
echo "by hand: ", $c->call('abc'), "\n";
echo "by hand: ", shmlink_throws(fn () => $c->call('fail')), "\n";
echo "pool stopped: ", $pool->stop(), "\n";

// Outside a pool.
putenv('SHMLINK_WORKER');
echo shmlink_throws(fn () => new Shmlink\Worker()), "\n";
echo shmlink_throws(fn () => new Shmlink\Worker('nope')), "\n";
echo shmlink_throws(fn () => new Shmlink\Worker(null, ['persistent' => true])), "\n";
?>
--EXPECTF--
shm: php:hello
  big: 3145732
  throw: 7 remote error 7: DomainException: asked to throw
  throw0: 0xffff0003 remote error 4294901763: LogicException: no code
  int: 0xffff0003 remote error 4294901763: the worker's handler returned int, expected string
  after: php:again
unix: php:hello
  big: 3145732
  throw: 7 remote error 7: DomainException: asked to throw
  throw0: 0xffff0003 remote error 4294901763: LogicException: no code
  int: 0xffff0003 remote error 4294901763: the worker's handler returned int, expected string
  after: php:again
pool stopped: 0
every run() returned
warning logged: true
by hand: cba
by hand: Shmlink\RemoteException: remote error 99: failed by hand
pool stopped: 0
Shmlink\ConnectException: invalid option SHMLINK_WORKER: not set: a worker is started by its supervisor (shmlink pool), or given an address
ValueError: Shmlink\Worker::__construct(): Argument #1 ($address) must be null, "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "nope" given
ValueError: Shmlink\Worker::__construct(): Argument #2 ($options) option "persistent" does not apply to a worker
