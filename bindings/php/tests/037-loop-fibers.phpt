--TEST--
examples/fiber-loop.php: 100 calls at once from Fibers on one client, driven by stream_select() (shm, unix, tcp); abandonAll() gives waiting calls up
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';
require dirname(__DIR__) . '/examples/fiber-loop.php';

use Shmlink\Examples\FiberLoop;

$echo = EchoServer::start(['--reply-ratio', '1']);
foreach (['shm', 'unix', 'tcp'] as $t) {
    $client = new Shmlink\Client($echo->addresses[$t]);
    $loop = new FiberLoop($client);
    $answers = [];
    for ($i = 0; $i < 100; $i++) {
        // Two calls in turn: the second is sent when the first's answer resumes the fiber.
        $loop->spawn(function () use ($loop, $i, &$answers) {
            $first = $loop->call("call $i");
            $answers[$i] = [$first, $loop->call("then $i")];
        });
    }
    echo "$t: in flight at once: ", $loop->waiting(), "\n";
    $loop->run();
    $right = 0;
    foreach ($answers as $i => $a) {
        $right += $a === ["call $i", "then $i"];
    }
    echo "  fibers answered: ", count($answers), ", answers right: $right, waiting: ", $loop->waiting(), "\n";
    // Blocking calls go on on the same client.
    echo "  next: ", $client->call('next'), ", nothing left: ", var_export($client->tryReceive(), true), "\n";

    // Calls given up while they wait: their answers never surface.
    $after = [];
    for ($i = 0; $i < 5; $i++) {
        $loop->spawn(function () use ($loop, $i, &$after) {
            $after[$i] = $loop->call("given up $i");
        });
    }
    echo "  abandoned: ", $loop->abandonAll(), ", waiting: ", $loop->waiting(), "\n";
    $loop->run();
    echo "  next: ", $client->call('after'), ", nothing left: ", var_export($client->tryReceive(), true),
        ", fibers resumed: ", count($after), "\n";
}
?>
--EXPECT--
shm: in flight at once: 100
  fibers answered: 100, answers right: 100, waiting: 0
  next: next, nothing left: NULL
  abandoned: 5, waiting: 0
  next: after, nothing left: NULL, fibers resumed: 0
unix: in flight at once: 100
  fibers answered: 100, answers right: 100, waiting: 0
  next: next, nothing left: NULL
  abandoned: 5, waiting: 0
  next: after, nothing left: NULL, fibers resumed: 0
tcp: in flight at once: 100
  fibers answered: 100, answers right: 100, waiting: 0
  next: next, nothing left: NULL
  abandoned: 5, waiting: 0
  next: after, nothing left: NULL, fibers resumed: 0
