--TEST--
shmlink pool with a PHP worker: a PHP client calling one at a time gets the worker on a direct line; the worker killed mid-call on it fails that call only; another client takes the worker back and no call fails
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

$script = <<<'PHP'
<?php
(new Shmlink\Worker())->run(function (string $request): string {
    if ($request === 'slow') {
        usleep(20000000);
    }
    return $request === 'pid' ? (string)getmypid() : "echo:$request";
});
PHP;

$states = fn (PoolServer $p) => array_column($p->status()['workers'], 'state');

// A client calling one at a time gets a worker of its own.
$pool = PoolServer::start($script, workers: 1);
$a = new Shmlink\Client($pool->addresses['shm'], ['timeout' => 30.0]);
$bad = 0;
for ($i = 0; $i < 200; $i++) {
    $bad += $a->call("a$i") !== "echo:a$i";
}
echo "200 calls, wrong answers: $bad\n";
echo "worker state: ", implode(',', $states($pool)), "\n";

// Another client needs the only worker: it takes it back; both go on.
$b = new Shmlink\Client($pool->addresses['shm'], ['timeout' => 30.0]);
for ($i = 0; $i < 100; $i++) {
    $bad += $b->call("b$i") !== "echo:b$i";
    $bad += $a->call("a$i") !== "echo:a$i";
}
echo "200 alternating calls, wrong answers: $bad, pool errors: ", $pool->status()['errors'], "\n";
unset($b);

// The worker killed during a call on the line: that call fails with the
// pool's code, the next one is answered by the replacement.
// After losing lines, a client asks again after longer runs of calls.
for ($i = 0; $i < 10000 && $states($pool) !== ['direct']; $i++) {
    $a->call("again$i");
}
echo "on a line again: ", var_export($states($pool) === ['direct'], true), "\n";
$worker = (int)$a->call('pid');
$pid = pcntl_fork();
if ($pid === 0) {
    shmlink_wait_until(function () use ($pool) {
        return in_array('direct', array_column($pool->status()['workers'], 'state'), true) ?: null;
    }, 'the worker on a line');
    usleep(100000);
    shmlink_kill($worker, 9);
    exit(0);
}
try {
    $a->call('slow');
    echo "slow call answered?\n";
} catch (Shmlink\RemoteException $e) {
    printf("killed on the line: 0x%x, says why: %s\n", $e->getCode(),
        var_export(str_contains($e->getMessage(), 'died during the call'), true));
}
pcntl_waitpid($pid, $status);
echo "next call: ", $a->call('after'), "\n";
$pool->ready(1);
echo "pool stopped: ", $pool->stop(), "\n";
?>
--EXPECT--
200 calls, wrong answers: 0
worker state: direct
200 alternating calls, wrong answers: 0, pool errors: 0
on a line again: true
killed on the line: 0xffff0012, says why: true
next call: echo:after
pool stopped: 0
