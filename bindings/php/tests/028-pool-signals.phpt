--TEST--
shmlink pool and its signals: SIGHUP reloads under load with no failed call; SIGTERM lets a call in flight finish, then the pool exits 0 and new clients are refused with an error naming the address
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

$script = <<<'PHP'
<?php
(new Shmlink\Worker())->run(function (string $request): string {
    if (str_starts_with($request, 'sleep:')) {
        usleep(1000 * (int)substr($request, 6));
        return 'slept';
    }
    return $request === 'pid' ? (string)getmypid() : "echo:$request";
});
PHP;

// SIGHUP under load: calls go on, every worker is replaced, none fails.
$pool = PoolServer::start($script, workers: 2, args: ['--no-lines']);
$before = array_column($pool->status()['workers'], 'pid');
$c = new Shmlink\Client($pool->addresses['shm'], ['timeout' => 30.0]);
$failed = 0;
$n = 0;
$hupped = false;
$deadline = hrtime(true) + (int)20e9;
while (hrtime(true) < $deadline) {
    try {
        $failed += $c->call("load $n") === "echo:load $n" ? 0 : 1;
    } catch (Throwable $e) {
        $failed++;
        echo "failed: ", $e->getMessage(), "\n";
    }
    $n++;
    if ($n === 200) {
        $pool->signal(SIGHUP);
        $hupped = true;
    }
    if ($hupped && $n % 100 === 0) {
        $now = $pool->status();
        $fresh = array_filter($now['workers'], fn ($w) => $w['generation'] === 1 && !$w['retiring']
            && in_array($w['state'], ['idle', 'busy'], true));
        $old = array_filter($now['workers'], fn ($w) => in_array($w['pid'], $before, true));
        if ($now['reloads'] === 1 && count($fresh) === 2 && count($old) === 0) {
            break;
        }
    }
}
echo "reloaded by SIGHUP: ", $pool->status()['reloads'], "\n";
echo "every worker replaced: ", var_export(array_intersect($before,
    array_column($pool->status()['workers'], 'pid')) === [], true), "\n";
echo "calls after the reload: ", var_export($n > 200, true), ", failed: $failed\n";

// SIGTERM with a call in flight: it is answered; then the pool exits 0.
$child = pcntl_fork();
if ($child === 0) {
    $mine = new Shmlink\Client($pool->addresses['unix'], ['timeout' => 30.0]);
    exit($mine->call('sleep:500') === 'slept' ? 0 : 1);
}
shmlink_wait_until(function () use ($pool) {
    foreach ($pool->status()['workers'] as $w) {
        if ($w['state'] === 'busy') {
            return true;
        }
    }
    return null;
}, 'the sleeping call on a worker');
$code = $pool->stop();
pcntl_waitpid($child, $status);
echo "the call in flight answered: ", var_export(pcntl_wifexited($status) && pcntl_wexitstatus($status) === 0, true), "\n";
echo "the pool exited with ", $code, "\n";
$msg = shmlink_throws(fn () => new Shmlink\Client($pool->addresses['shm'], ['timeout' => 2.0]));
echo "a new client after the stop: ", var_export(str_contains($msg, $pool->dir), true), "\n";
?>
--EXPECT--
reloaded by SIGHUP: 1
every worker replaced: true
calls after the reload: true, failed: 0
the call in flight answered: true
the pool exited with 0
a new client after the stop: true
