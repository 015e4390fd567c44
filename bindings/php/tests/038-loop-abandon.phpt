--TEST--
Client::abandon(): the abandoned call's answer is dropped (still coming, or already filed), the next call gets its own (shm, unix, tcp)
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';

/** The next answer through tryReceive() and stream_select(): [id, response]. */
function next_answer(Shmlink\Client $c): array
{
    $deadline = hrtime(true) + (int)(SHMLINK_TEST_DEADLINE * 1e9);
    while (($answer = $c->tryReceive()) === null) {
        $read = [$c->stream()];
        $write = $except = null;
        if (hrtime(true) > $deadline || stream_select($read, $write, $except, (int)SHMLINK_TEST_DEADLINE) !== 1) {
            throw new RuntimeException('no answer came');
        }
    }
    return $answer;
}

$echo = EchoServer::start(['--reply-ratio', '1']);
foreach (['shm', 'unix', 'tcp'] as $t) {
    $c = new Shmlink\Client($echo->addresses[$t]);
    $c->stream();

    // Given up while on its way: the answers come in order, and A's is dropped.
    $a = $c->send('A');
    $b = $c->send('B');
    echo "$t: abandon A: ", var_export($c->abandon($a), true),
        ", again: ", var_export($c->abandon($a), true), "\n";
    [$id, $response] = next_answer($c);
    echo "  next answer: $response, its id: ", var_export($id === $b, true), "\n";
    echo "  then: ", var_export($c->tryReceive(), true), "; ",
        shmlink_throws(fn () => $c->receive($id, 0.5)), "\n";
    echo "  next call: ", $c->call('C'), "\n";

    // Given up after a blocking call filed its answer: dropped from the queue.
    $d = $c->send('D');
    echo "  call between: ", $c->call('E'), "\n";
    echo "  abandon D: ", var_export($c->abandon($d), true), ", then: ", var_export($c->tryReceive(), true), "\n";

    // receive() after an abandon gets the other call's answer.
    $f = $c->send('F');
    $g = $c->send('G');
    $c->abandon($f);
    echo "  receive: ", $c->receive($id, 5.0), ", its id: ", var_export($id === $g, true), "\n";

    // Calls not in flight: answered and received, never sent, not an id.
    echo "  abandon a received call: ", var_export($c->abandon($g), true),
        ", an unknown id: ", var_export($c->abandon($g + 1000), true),
        ", 0: ", var_export($c->abandon(0), true), ", -1: ", var_export($c->abandon(-1), true), "\n";
    $h = $c->send('H');
    $c->close();
    echo "  abandon after close(): ", var_export($c->abandon($h), true), "\n";
}
?>
--EXPECTF--
shm: abandon A: true, again: false
  next answer: B, its id: true
  then: NULL; Shmlink\Exception: recv on the session with %s: no call is in flight
  next call: C
  call between: E
  abandon D: true, then: NULL
  receive: G, its id: true
  abandon a received call: false, an unknown id: false, 0: false, -1: false
  abandon after close(): false
unix: abandon A: true, again: false
  next answer: B, its id: true
  then: NULL; Shmlink\Exception: recv on the session with %s: no call is in flight
  next call: C
  call between: E
  abandon D: true, then: NULL
  receive: G, its id: true
  abandon a received call: false, an unknown id: false, 0: false, -1: false
  abandon after close(): false
tcp: abandon A: true, again: false
  next answer: B, its id: true
  then: NULL; Shmlink\Exception: recv on the session with %s: no call is in flight
  next call: C
  call between: E
  abandon D: true, then: NULL
  receive: G, its id: true
  abandon a received call: false, an unknown id: false, 0: false, -1: false
  abandon after close(): false
