--TEST--
shmlink pool with PHP workers: a worker killed mid-call fails that call only and is replaced; recycling by --max-jobs and a reload under load fail no call
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
    return $request === 'pid' ? (string)getmypid() : $request;
});
PHP;

// Killed mid-call.
$pool = PoolServer::start($script, workers: 2);
$c = new Shmlink\Client($pool->addresses['shm'], ['timeout' => 30.0]);
$busy = null;
$killer = function () use ($pool, &$busy) {
    $busy = shmlink_wait_until(function () use ($pool) {
        foreach ($pool->status()['workers'] as $w) {
            if ($w['state'] === 'busy') {
                return $w['pid'];
            }
        }
        return null;
    }, 'a busy worker');
    shmlink_kill($busy, 9);
};
// The killer runs in a child: this process is blocked in call().
$pid = pcntl_fork();
if ($pid === 0) {
    $killer();
    exit(0);
}
$t0 = hrtime(true);
try {
    $c->call('slow');
    echo "slow call answered?\n";
} catch (Shmlink\RemoteException $e) {
    printf("killed mid-call: 0x%x, within 5 s: %s\n", $e->getCode(),
        var_export((hrtime(true) - $t0) / 1e9 < 5.0, true));
    echo "  says why: ", var_export(str_contains($e->getMessage(), 'died during the call'), true), "\n";
    echo "  is RemoteException::WORKER_DIED: ", var_export($e->getCode() === Shmlink\RemoteException::WORKER_DIED, true), "\n";
}
pcntl_waitpid($pid, $status);
$other = new Shmlink\Client($pool->addresses['unix']);
echo "others fine: ", $other->call('ok'), "\n";
$pool->ready(2);
echo "back to 2 workers\n";
$pool->stop();

// Recycling: every worker serves 5 calls, none fails.
$pool = PoolServer::start($script, workers: 2, args: ['--max-jobs', '5']);
$c = new Shmlink\Client($pool->addresses['shm']);
$pids = [];
for ($i = 0; $i < 40; $i++) {
    $pids[$c->call('pid')] = true;
}
echo "40 calls on ", count($pids) >= 8 ? "at least 8" : count($pids), " workers\n";

// A reload under load: calls go on while every worker is replaced.
$before = array_column($pool->status()['workers'], 'pid');
$reloader = pcntl_fork();
if ($reloader === 0) {
    usleep(100000);
    exec(escapeshellarg(shmlink_bin()) . ' pool reload ' . escapeshellarg($pool->control), $out, $rc);
    exit($rc);
}
$failed = 0;
$deadline = hrtime(true) + (int)3e9;
$n = 0;
while (hrtime(true) < $deadline) {
    try {
        $c->call("load $n");
        $n++;
    } catch (Shmlink\Exception $e) {
        $failed++;
        echo "failed: ", $e->getMessage(), "\n";
    }
}
pcntl_waitpid($reloader, $status);
echo "reload exit: ", pcntl_wexitstatus($status), "\n";
echo "calls during the reload: ", $n > 100 ? "many" : $n, ", failed: $failed\n";
$pool->ready(2);
$after = array_column($pool->status()['workers'], 'pid');
echo "every worker replaced: ", var_export(array_intersect($before, $after) === [], true), "\n";
echo "pool stopped: ", $pool->stop(), "\n";
?>
--EXPECT--
killed mid-call: 0xffff0012, within 5 s: true
  says why: true
  is RemoteException::WORKER_DIED: true
others fine: ok
back to 2 workers
40 calls on at least 8 workers
reload exit: 0
calls during the reload: many, failed: 0
every worker replaced: true
pool stopped: 0
