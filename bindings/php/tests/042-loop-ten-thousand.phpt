--TEST--
Client::stream() and tryReceive(): 10,000 calls in flight on one client (shm, unix, tcp), every answer matched to its call by id, none twice
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';

$echo = EchoServer::start(['--reply-ratio', '1']);
foreach (['shm', 'unix', 'tcp'] as $t) {
    $c = new Shmlink\Client($echo->addresses[$t]);
    $s = $c->stream();
    $want = [];
    for ($i = 0; $i < 10000; $i++) {
        // send() waits for room while the server answers, never for an answer.
        $want[$c->send("call-$i")] = "call-$i";
    }
    $matched = $twice = 0;
    $deadline = microtime(true) + SHMLINK_TEST_DEADLINE;
    while ($want && microtime(true) < $deadline) {
        while (($answer = $c->tryReceive()) !== null) {
            [$id, $response] = $answer;
            if (!isset($want[$id])) {
                $twice++;
                continue;
            }
            $matched += (int)($want[$id] === $response);
            unset($want[$id]);
        }
        if ($want) {
            $read = [$s];
            $write = $except = null;
            stream_select($read, $write, $except, 1);
        }
    }
    echo "$t: $matched of 10000 matched, ", count($want), " missing, $twice unknown\n";
    $c->close();
}
$echo->stop();
?>
--EXPECT--
shm: 10000 of 10000 matched, 0 missing, 0 unknown
unix: 10000 of 10000 matched, 0 missing, 0 unknown
tcp: 10000 of 10000 matched, 0 missing, 0 unknown
