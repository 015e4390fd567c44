--TEST--
shmlink pool with PHP workers: calls a PHP client pipelines (send, then receive) run on several workers at once
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';

// "meet DIR N": leave a file named by the pid in DIR, wait (up to 10 s) until
// DIR holds N files, answer the pid, or "alone" if the others never came.
$script = <<<'PHP'
<?php
(new Shmlink\Worker())->run(function (string $request): string {
    [, $dir, $n] = explode(' ', $request);
    touch("$dir/" . getmypid());
    $deadline = hrtime(true) + (int)10e9;
    while (hrtime(true) < $deadline) {
        clearstatcache();
        if (count(glob("$dir/*")) >= (int)$n) {
            return (string)getmypid();
        }
        usleep(1000);
    }
    return 'alone';
});
PHP;

$pool = PoolServer::start($script, workers: 2);
foreach (['shm', 'unix'] as $t) {
    $c = new Shmlink\Client($pool->addresses[$t], ['timeout' => 30.0]);
    $gate = "$pool->dir/gate-$t";
    $meeting = "$pool->dir/meeting-$t";
    mkdir($gate);
    mkdir($meeting);
    // The first call holds the session at a gate; the two calls sent while it
    // waits there must then run at once, each waiting for the other.
    $first = $c->send("meet $gate 2");
    shmlink_wait_until(function () use ($gate) {
        clearstatcache();
        return count(glob("$gate/*")) === 1 ? true : null;
    }, 'the first call at its gate');
    $ids = [$c->send("meet $meeting 2"), $c->send("meet $meeting 2")];
    touch("$gate/opener");
    $pids = [];
    for ($i = 0; $i < 3; $i++) {
        $answer = $c->receive($id);
        if ($id !== $first) {
            $pids[$answer] = in_array($id, $ids, true);
        }
    }
    echo "$t: ", count($pids), " workers answered, none alone: ",
        var_export(!isset($pids['alone']) && !in_array(false, $pids, true), true), "\n";
}
$pool->stop();
?>
--EXPECT--
shm: 2 workers answered, none alone: true
unix: 2 workers answered, none alone: true
