--TEST--
tryReceive() and a handler's error: RemoteException carrying the failed call's id (callId, also from receive()), the other answers unaffected; examples/fiber-loop.php hands it to the right fiber
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';
require dirname(__DIR__) . '/examples/fiber-loop.php';

$server = PhpServer::start(function (string $request) {
    if (str_starts_with($request, 'fail:')) {
        throw new RuntimeException("refused $request", (int)substr($request, 5));
    }
    return strtoupper($request);
});

/** The next answer through tryReceive() and stream_select(), or the exception it threw. */
function next_answer(Shmlink\Client $c): array|Shmlink\Exception
{
    for (;;) {
        try {
            $answer = $c->tryReceive();
        } catch (Shmlink\Exception $e) {
            return $e;
        }
        if ($answer !== null) {
            return $answer;
        }
        $read = [$c->stream()];
        $write = $except = null;
        if (stream_select($read, $write, $except, (int)SHMLINK_TEST_DEADLINE) !== 1) {
            throw new RuntimeException('no answer came');
        }
    }
}

foreach (['shm', 'unix', 'tcp'] as $t) {
    $c = new Shmlink\Client($server->addresses[$t]);
    $ids = [$c->send('one'), $c->send('fail:404'), $c->send('two')];
    echo "$t:\n";
    foreach ($ids as $k => $id) {
        $got = next_answer($c);
        if ($got instanceof Shmlink\RemoteException) {
            echo "  ", get_class($got), " code ", $got->getCode(), ": ", $got->getMessage(),
                "; callId is call #$k's: ", var_export($got->callId === $id, true), "\n";
        } else {
            echo "  [id of call #$k: ", var_export($got[0] === $id, true), ", $got[1]]\n";
        }
    }
    $id = $c->send('fail:7');
    try {
        $c->receive();
    } catch (Shmlink\RemoteException $e) {
        echo "  receive(): code ", $e->getCode(), ", callId matches: ", var_export($e->callId === $id, true), "\n";
    }
    try {
        $c->call('fail:9');
    } catch (Shmlink\RemoteException $e) {
        echo "  call(): code ", $e->getCode(), ", callId: ", var_export($e->callId, true), "\n";
    }

    // Fibers: each gets its own answer or its own error.
    $loop = new Shmlink\Examples\FiberLoop($c);
    $results = [];
    for ($i = 1; $i <= 6; $i++) {
        $loop->spawn(function () use ($loop, $i, &$results) {
            try {
                $results[$i] = $loop->call($i % 2 ? "fiber $i" : "fail:$i");
            } catch (Shmlink\RemoteException $e) {
                $results[$i] = 'error ' . $e->getCode();
            }
        });
    }
    $loop->run();
    ksort($results);
    echo "  fibers: ", implode(', ', $results), "\n";
    echo "  session fine: ", $c->call('after'), "\n";
}
?>
--EXPECT--
shm:
  [id of call #0: true, ONE]
  Shmlink\RemoteException code 404: remote error 404: refused fail:404; callId is call #1's: true
  [id of call #2: true, TWO]
  receive(): code 7, callId matches: true
  call(): code 9, callId: NULL
  fibers: FIBER 1, error 2, FIBER 3, error 4, FIBER 5, error 6
  session fine: AFTER
unix:
  [id of call #0: true, ONE]
  Shmlink\RemoteException code 404: remote error 404: refused fail:404; callId is call #1's: true
  [id of call #2: true, TWO]
  receive(): code 7, callId matches: true
  call(): code 9, callId: NULL
  fibers: FIBER 1, error 2, FIBER 3, error 4, FIBER 5, error 6
  session fine: AFTER
tcp:
  [id of call #0: true, ONE]
  Shmlink\RemoteException code 404: remote error 404: refused fail:404; callId is call #1's: true
  [id of call #2: true, TWO]
  receive(): code 7, callId matches: true
  call(): code 9, callId: NULL
  fibers: FIBER 1, error 2, FIBER 3, error 4, FIBER 5, error 6
  session fine: AFTER
