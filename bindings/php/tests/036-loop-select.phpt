--TEST--
Client::stream() and tryReceive(): stream_select() waits for several pipelined answers (shm, unix, tcp); one stream per client, never read, closed with the client; no descriptor left behind
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';

function open_fds(): int
{
    return count(scandir('/proc/self/fd')) - 2;
}

/** Waits until $stream is readable; false after $seconds. */
function readable($stream, float $seconds = SHMLINK_TEST_DEADLINE): bool
{
    $read = [$stream];
    $write = $except = null;
    return stream_select($read, $write, $except, (int)$seconds) === 1;
}

$echo = EchoServer::start(['--reply-ratio', '1']);
foreach (['shm', 'unix', 'tcp'] as $t) {
    $before = open_fds();
    $c = new Shmlink\Client($echo->addresses[$t]);
    $s = $c->stream();
    $meta = stream_get_meta_data($s);
    echo "$t: ", get_resource_type($s), " {$meta['stream_type']} mode {$meta['mode']}, same stream again: ",
        var_export($c->stream() === $s, true), "\n";
    echo "  nothing in flight: ", var_export($c->tryReceive(), true), "\n";

    // Ten calls in flight; answers taken as they come, waiting with stream_select().
    $sent = [];
    for ($i = 0; $i < 10; $i++) {
        $sent[$c->send("req-$i")] = "req-$i";
    }
    $got = [];
    for (;;) {
        while (($answer = $c->tryReceive()) !== null) {
            [$id, $response] = $answer;
            $got[$id] = $response;
        }
        if (count($got) === count($sent)) {
            break;
        }
        if (!readable($s)) {
            echo "  not readable, ", count($got), " of 10 answered\n";
            break;
        }
    }
    ksort($got);
    echo "  answers match their calls: ", var_export($got === $sent, true), "\n";

    // Blocking calls and pipelining with receive() go on on the same client.
    echo "  call: ", $c->call('blocking'), "\n";
    $id = $c->send('piped');
    echo "  receive: ", $c->receive($got_id, 5.0), ", id matches: ", var_export($got_id === $id, true), "\n";

    // The stream is watched, not read or written.
    $read = fread($s, 10);
    echo "  fread: ", var_export($read, true), "\n";
    echo "  fwrite: ", var_export(@fwrite($s, 'x'), true), "\n";

    // fclose() on it leaves the client open; stream() then makes a new one.
    fclose($s);
    echo "  after fclose: ", $c->call('still open'), "\n";
    $s2 = $c->stream();
    $id = $c->send('new stream');
    // Take before waiting; a wake-up may find nothing (over shm: a bell left
    // from the call before), so wait again until the answer is taken.
    $answer = $c->tryReceive();
    $woke = true;
    $deadline = microtime(true) + SHMLINK_TEST_DEADLINE;
    while ($answer === null && $woke && microtime(true) < $deadline) {
        $woke = readable($s2);
        $answer = $c->tryReceive();
    }
    echo "  new stream readable: ", var_export($woke, true), "\n";
    echo "  answer: ", var_export($answer === [$id, 'new stream'], true), "\n";

    // close() closes the stream too; the client's and the stream's descriptors are gone.
    $c->close();
    echo "  stream after close(): ", get_resource_type($s2), "\n";
    echo "  ", shmlink_throws(fn () => $c->stream()), "\n";
    unset($c, $s, $s2);
    echo "  descriptors left: ", open_fds() - $before, "\n";

    // Dropping the client without close() closes its stream as well.
    $c = new Shmlink\Client($echo->addresses[$t]);
    $s = $c->stream();
    unset($c);
    echo "  stream after the client went: ", get_resource_type($s), "\n";
    unset($s);
    echo "  descriptors left: ", open_fds() - $before, "\n";
}
?>
--EXPECTF--
shm: stream shmlink mode r, same stream again: true
  nothing in flight: NULL
  answers match their calls: true
  call: blocking
  receive: piped, id matches: true

Warning: fread(): the stream of Shmlink\Client::stream() is not read: watch it for readability, then take answers with Shmlink\Client::tryReceive() in %s on line %d
  fread: false
  fwrite: false
  after fclose: still open
  new stream readable: true
  answer: true
  stream after close(): Unknown
  Shmlink\ClosedException: client of %s was closed with Shmlink\Client::close()
  descriptors left: 0
  stream after the client went: Unknown
  descriptors left: 0
unix: stream shmlink mode r, same stream again: true
  nothing in flight: NULL
  answers match their calls: true
  call: blocking
  receive: piped, id matches: true

Warning: fread(): the stream of Shmlink\Client::stream() is not read: watch it for readability, then take answers with Shmlink\Client::tryReceive() in %s on line %d
  fread: false
  fwrite: false
  after fclose: still open
  new stream readable: true
  answer: true
  stream after close(): Unknown
  Shmlink\ClosedException: client of %s was closed with Shmlink\Client::close()
  descriptors left: 0
  stream after the client went: Unknown
  descriptors left: 0
tcp: stream shmlink mode r, same stream again: true
  nothing in flight: NULL
  answers match their calls: true
  call: blocking
  receive: piped, id matches: true

Warning: fread(): the stream of Shmlink\Client::stream() is not read: watch it for readability, then take answers with Shmlink\Client::tryReceive() in %s on line %d
  fread: false
  fwrite: false
  after fclose: still open
  new stream readable: true
  answer: true
  stream after close(): Unknown
  Shmlink\ClosedException: client of %s was closed with Shmlink\Client::close()
  descriptors left: 0
  stream after the client went: Unknown
  descriptors left: 0
