--TEST--
A server out of shared memory: shm: sessions continue over the socket (transport() says unix), or are refused with shm_required
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';

/* Room for one session's segment (64 KiB rings: 132 KiB). */
$echo = EchoServer::start(['--max-shm-bytes', '135168', '--reply-ratio', '1']);
$a = $echo->addresses['shm'];
$first = new Shmlink\Client($a);
echo "first: ", $first->transport(), " ", $first->call('one'), "\n";
$second = new Shmlink\Client($a);
echo "second: ", $second->transport(), " ", $second->call('two'), "\n";
echo shmlink_throws(fn () => new Shmlink\Client($a, ['shm_required' => true])), "\n";
echo "first still: ", $first->call('three'), "\n";
unset($first, $second);
/* Once the server has seen the first session end (its goodbye is read on
 * the server's session thread, not waited for), its segment is free again
 * or kept for this process: either way this process gets shared memory. */
$strict = shmlink_wait_until(function () use ($a) {
    try {
        return new Shmlink\Client($a, ['shm_required' => true]);
    } catch (Shmlink\ConnectException $e) {
        return null;
    }
}, 'the first session to end on the server');
echo "strict: ", $strict->transport(), " ", $strict->call('four'), "\n";
?>
--EXPECTF--
first: shm one
second: unix two
Shmlink\ConnectException: %srefused the session (server failure)%scannot give this session shared memory: its shared memory limit is reached%s
first still: three
strict: shm four
