--TEST--
Bad options and timeouts: ValueError/TypeError with the Argument #N wording, before anything is sent
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';

$echo = EchoServer::start();
$a = $echo->addresses['unix'];
$bad = [
    ['nope' => 1],
    [0 => true],
    ['timeout' => '5'],
    ['timeout' => 0],
    ['timeout' => -1.5],
    ['timeout' => NAN],
    ['timeout' => INF],
    ['persistent' => 1],
    ['wait' => 'nap'],
    ['wait' => 2],
    ['ring_size' => 5000],
    ['ring_size' => 1024],
    ['ring_size' => 1 << 30],
    ['ring_size' => 65536.0],
    ['max_message_size' => 0],
    ['max_message_size' => '1M'],
    ['shm_required' => 1],
];
foreach ($bad as $o) {
    echo shmlink_throws(fn () => new Shmlink\Client($a, $o)), "\n";
}
echo shmlink_throws(fn () => new Shmlink\Client($a, ['max_message_size' => PHP_INT_MAX])), "\n";

echo "valid:\n";
$c = new Shmlink\Client($a, ['timeout' => 1, 'persistent' => false, 'wait' => 'sleep',
    'ring_size' => 8192, 'max_message_size' => 1 << 20]);
echo strlen($c->call(str_repeat('z', 80))), "\n";

echo "call/receive timeouts:\n";
foreach ([0, -1, NAN, INF, -INF] as $t) {
    echo shmlink_throws(fn () => $c->call('x', $t)), "\n";
}
echo shmlink_throws(fn () => $c->receive($id, 0.0)), "\n";
echo shmlink_throws(fn () => $c->call('x', 'soon')), "\n";
echo shmlink_throws(fn () => $c->call([])), "\n";
echo "client still fine: ", strlen($c->call(str_repeat('z', 16), 1e12)), "\n";

echo "server:\n";
$dir = shmlink_test_dir();
foreach ([
    ['nope' => 1],
    ['allowed_uids' => 1000],
    ['allowed_uids' => ['x']],
    ['allowed_uids' => [-1]],
    ['allowed_gids' => [1 << 32]],
    ['socket_mode' => 01000],
    ['socket_mode' => '0660'],
    ['socket_group' => -1],
    ['max_sessions' => 0],
    ['wait' => 'forever'],
    ['max_message_size' => -1],
] as $o) {
    echo shmlink_throws(fn () => new Shmlink\Server("unix:$dir/s.sock", $o)), "\n";
}
$s = new Shmlink\Server("unix:$dir/s.sock", ['allowed_uids' => [getmyuid()], 'allowed_gids' => [getmygid()],
    'socket_mode' => 0660, 'max_sessions' => 4, 'wait' => 'busy', 'max_message_size' => 1 << 16]);
printf("mode %o\n", fileperms("$dir/s.sock") & 0777);
$st = Shmlink\stats();
echo "connects={$st['connects']} errors={$st['errors']}\n";
?>
--EXPECT--
ValueError: Shmlink\Client::__construct(): Argument #2 ($options) contains unknown option "nope" (known: timeout, persistent, wait, ring_size, max_message_size, shm_required)
ValueError: Shmlink\Client::__construct(): Argument #2 ($options) contains unknown option 0 (known: timeout, persistent, wait, ring_size, max_message_size, shm_required)
TypeError: Shmlink\Client::__construct(): Argument #2 ($options) option "timeout" must be of type float, string given
ValueError: Shmlink\Client::__construct(): Argument #2 ($options) option "timeout" must be a finite number of seconds greater than 0
ValueError: Shmlink\Client::__construct(): Argument #2 ($options) option "timeout" must be a finite number of seconds greater than 0
ValueError: Shmlink\Client::__construct(): Argument #2 ($options) option "timeout" must be a finite number of seconds greater than 0
ValueError: Shmlink\Client::__construct(): Argument #2 ($options) option "timeout" must be a finite number of seconds greater than 0
TypeError: Shmlink\Client::__construct(): Argument #2 ($options) option "persistent" must be of type bool, int given
ValueError: Shmlink\Client::__construct(): Argument #2 ($options) option "wait" must be "sleep", "spin" or "busy", "nap" given
TypeError: Shmlink\Client::__construct(): Argument #2 ($options) option "wait" must be of type string, int given
ValueError: Shmlink\Client::__construct(): Argument #2 ($options) option "ring_size" must be a power of two, 5000 given
ValueError: Shmlink\Client::__construct(): Argument #2 ($options) option "ring_size" must be between 4096 and 268435456, 1024 given
ValueError: Shmlink\Client::__construct(): Argument #2 ($options) option "ring_size" must be between 4096 and 268435456, 1073741824 given
TypeError: Shmlink\Client::__construct(): Argument #2 ($options) option "ring_size" must be of type int, float given
ValueError: Shmlink\Client::__construct(): Argument #2 ($options) option "max_message_size" must be between 1024 and 68719476720, 0 given
TypeError: Shmlink\Client::__construct(): Argument #2 ($options) option "max_message_size" must be of type int, string given
TypeError: Shmlink\Client::__construct(): Argument #2 ($options) option "shm_required" must be of type bool, int given
ValueError: Shmlink\Client::__construct(): Argument #2 ($options) option "max_message_size" must be between 1024 and 68719476720, 9223372036854775807 given
valid:
10
call/receive timeouts:
ValueError: Shmlink\Client::call(): Argument #2 ($timeout) must be null or a finite number of seconds greater than 0
ValueError: Shmlink\Client::call(): Argument #2 ($timeout) must be null or a finite number of seconds greater than 0
ValueError: Shmlink\Client::call(): Argument #2 ($timeout) must be null or a finite number of seconds greater than 0
ValueError: Shmlink\Client::call(): Argument #2 ($timeout) must be null or a finite number of seconds greater than 0
ValueError: Shmlink\Client::call(): Argument #2 ($timeout) must be null or a finite number of seconds greater than 0
ValueError: Shmlink\Client::receive(): Argument #2 ($timeout) must be null or a finite number of seconds greater than 0
TypeError: Shmlink\Client::call(): Argument #2 ($timeout) must be of type ?float, string given
TypeError: Shmlink\Client::call(): Argument #1 ($request) must be of type string, array given
client still fine: 2
server:
ValueError: Shmlink\Server::__construct(): Argument #2 ($options) contains unknown option "nope" (known: allowed_uids, allowed_gids, socket_mode, socket_group, max_sessions, wait, max_message_size)
TypeError: Shmlink\Server::__construct(): Argument #2 ($options) option "allowed_uids" must be of type array, int given
TypeError: Shmlink\Server::__construct(): Argument #2 ($options) option "allowed_uids" must contain only int, string given
ValueError: Shmlink\Server::__construct(): Argument #2 ($options) option "allowed_uids" must contain ids from 0 to 4294967295, -1 given
ValueError: Shmlink\Server::__construct(): Argument #2 ($options) option "allowed_gids" must contain ids from 0 to 4294967295, 4294967296 given
ValueError: Shmlink\Server::__construct(): Argument #2 ($options) option "socket_mode" must be between 1 and 511, 512 given
TypeError: Shmlink\Server::__construct(): Argument #2 ($options) option "socket_mode" must be of type int, string given
ValueError: Shmlink\Server::__construct(): Argument #2 ($options) option "socket_group" must be between 0 and 4294967295, -1 given
ValueError: Shmlink\Server::__construct(): Argument #2 ($options) option "max_sessions" must be between 1 and 4294967295, 0 given
ValueError: Shmlink\Server::__construct(): Argument #2 ($options) option "wait" must be "sleep", "spin" or "busy", "forever" given
ValueError: Shmlink\Server::__construct(): Argument #2 ($options) option "max_message_size" must be between 1024 and 68719476720, -1 given
mode 660
connects=1 errors=0
