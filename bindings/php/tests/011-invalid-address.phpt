--TEST--
Invalid addresses: ValueError naming the argument; nobody listening: ConnectException
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';

$dir = shmlink_test_dir();
foreach (['', 'foo', 'shm:', 'unix:', 'shm/x', 'http://x', 'tcp:', 'tcp:host', 'tcp::80', 'tcp:h:',
          'tcp:h:99999', 'tcp:h:8o', 'tcp:h:-1', "unix:\xff\xfe", "shm:/tmp/a\0b",
          'unix:/' . str_repeat('x', 120)] as $a) {
    echo shmlink_throws(fn () => new Shmlink\Client($a)), "\n";
}
echo shmlink_throws(fn () => new Shmlink\Client("unix:$dir/nobody.sock")), "\n";
echo shmlink_throws(fn () => new Shmlink\Client("shm:$dir/nobody.sock")), "\n";
touch("$dir/not-a-socket");
echo shmlink_throws(fn () => new Shmlink\Client("unix:$dir/not-a-socket")), "\n";

echo "server:\n";
echo shmlink_throws(fn () => new Shmlink\Server('foo')), "\n";
echo shmlink_throws(fn () => new Shmlink\Server([])), "\n";
echo shmlink_throws(fn () => new Shmlink\Server(["unix:$dir/a.sock", 'tcp:nope'])), "\n";
echo shmlink_throws(fn () => new Shmlink\Server(["unix:$dir/a.sock", 7])), "\n";
echo shmlink_throws(fn () => new Shmlink\Server(42)), "\n"; // coerced to "42"
echo shmlink_throws(fn () => new Shmlink\Server(new stdClass())), "\n";
echo shmlink_throws(fn () => new Shmlink\Server("unix:$dir/a\0b")), "\n";
echo shmlink_throws(fn () => new Shmlink\Server("unix:/nonexistent-dir/x.sock")), "\n";
$s = new Shmlink\Server(["unix:$dir/a.sock", "shm:$dir/b.sock"]);
echo shmlink_throws(fn () => new Shmlink\Server("unix:$dir/a.sock")), "\n";
?>
--EXPECTF--
ValueError: Shmlink\Client::__construct(): Argument #1 ($address) must be "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "" given
ValueError: Shmlink\Client::__construct(): Argument #1 ($address) must be "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "foo" given
ValueError: Shmlink\Client::__construct(): Argument #1 ($address) must be "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "shm:" given
ValueError: Shmlink\Client::__construct(): Argument #1 ($address) must be "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "unix:" given
ValueError: Shmlink\Client::__construct(): Argument #1 ($address) must be "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "shm/x" given
ValueError: Shmlink\Client::__construct(): Argument #1 ($address) must be "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "http://x" given
ValueError: Shmlink\Client::__construct(): Argument #1 ($address) must be "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "tcp:" given
ValueError: Shmlink\Client::__construct(): Argument #1 ($address) must be "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "tcp:host" given
ValueError: Shmlink\Client::__construct(): Argument #1 ($address) must be "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "tcp::80" given
ValueError: Shmlink\Client::__construct(): Argument #1 ($address) must be "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "tcp:h:" given
ValueError: Shmlink\Client::__construct(): Argument #1 ($address) must be "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "tcp:h:99999" given
ValueError: Shmlink\Client::__construct(): Argument #1 ($address) must be "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "tcp:h:8o" given
ValueError: Shmlink\Client::__construct(): Argument #1 ($address) must be "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "tcp:h:-1" given
ValueError: Shmlink\Client::__construct(): Argument #1 ($address) must be "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "unix:%s" given
ValueError: Shmlink\Client::__construct(): Argument #1 ($address) must not contain any null bytes
ValueError: Shmlink\Client::__construct(): Argument #1 ($address) is not a valid address: invalid address "unix:/%s": socket path is 121 bytes, the limit is 107 (expected shm:PATH, unix:PATH or tcp:HOST:PORT)
Shmlink\ConnectException: cannot connect to unix:%s/nobody.sock: No such file or directory (os error 2)
Shmlink\ConnectException: cannot connect to shm:%s/nobody.sock: No such file or directory (os error 2)
Shmlink\ConnectException: cannot connect to unix:%s/not-a-socket: Connection refused (os error 111)
server:
ValueError: Shmlink\Server::__construct(): Argument #1 ($addresses) must be "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "foo" given
ValueError: Shmlink\Server::__construct(): Argument #1 ($addresses) must not be empty
ValueError: Shmlink\Server::__construct(): Argument #1 ($addresses) must contain only "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "tcp:nope" given
TypeError: Shmlink\Server::__construct(): Argument #1 ($addresses) must contain only strings, int given
ValueError: Shmlink\Server::__construct(): Argument #1 ($addresses) must be "shm:PATH", "unix:PATH" or "tcp:HOST:PORT", "42" given
TypeError: Shmlink\Server::__construct(): Argument #1 ($addresses) must be of type array|string, stdClass given
ValueError: Shmlink\Server::__construct(): Argument #1 ($addresses) must not contain any null bytes
Shmlink\Exception: cannot listen on unix:/nonexistent-dir/x.sock: %s
Shmlink\Exception: cannot listen on unix:%s/a.sock: another server is already listening on %s/a.sock
