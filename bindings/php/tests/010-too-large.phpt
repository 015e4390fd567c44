--TEST--
Messages too large: a response above the client's max_message_size, a request above the server's
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

$php = PhpServer::start(fn (string $r) => strlen($r) . ' bytes', options: ['max_message_size' => 4096]);
$huge = EchoServer::start(['--reply-size', '100000']);
foreach (['shm', 'unix', 'tcp'] as $t) {
    echo "$t:\n";
    // The echo server answers 100000 bytes; this client accepts 4096 at most.
    $c = new Shmlink\Client($huge->addresses[$t], ['max_message_size' => 4096]);
    try {
        $c->call('give me a lot');
    } catch (Shmlink\RemoteException $e) {
        printf("  response: %s code 0x%X: %s\n", get_class($e), $e->getCode(), $e->getMessage());
    }
    $big = new Shmlink\Client($huge->addresses[$t]);
    echo "  default limit: ", strlen($big->call('x')), " bytes\n";
    // The PHP server accepts 4096 bytes at most: nothing is sent, the session stays usable.
    $c = new Shmlink\Client($php->addresses[$t]);
    echo "  request: ", shmlink_throws(fn () => $c->call(str_repeat('x', 5000))), "\n";
    echo "  send: ", shmlink_throws(fn () => $c->send(str_repeat('x', 5000))), "\n";
    echo "  then: ", $c->call(str_repeat('x', 4000)), "\n";
}
?>
--EXPECT--
shm:
  response: Shmlink\RemoteException code 0xFFFF0002: remote error 4294901762: response of 100000 bytes exceeds the client's maximum message size of 4096 bytes
  default limit: 100000 bytes
  request: Shmlink\Exception: message of 5000 bytes exceeds the maximum message size of 4096 bytes (the peer's limit)
  send: Shmlink\Exception: message of 5000 bytes exceeds the maximum message size of 4096 bytes (the peer's limit)
  then: 4000 bytes
unix:
  response: Shmlink\RemoteException code 0xFFFF0002: remote error 4294901762: response of 100000 bytes exceeds the client's maximum message size of 4096 bytes
  default limit: 100000 bytes
  request: Shmlink\Exception: message of 5000 bytes exceeds the maximum message size of 4096 bytes (the peer's limit)
  send: Shmlink\Exception: message of 5000 bytes exceeds the maximum message size of 4096 bytes (the peer's limit)
  then: 4000 bytes
tcp:
  response: Shmlink\RemoteException code 0xFFFF0002: remote error 4294901762: response of 100000 bytes exceeds the client's maximum message size of 4096 bytes
  default limit: 100000 bytes
  request: Shmlink\Exception: message of 5000 bytes exceeds the maximum message size of 4096 bytes (the peer's limit)
  send: Shmlink\Exception: message of 5000 bytes exceeds the maximum message size of 4096 bytes (the peer's limit)
  then: 4000 bytes
