--TEST--
phpinfo() shows the library version and this process's counters
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';

$echo = EchoServer::start();
$c = new Shmlink\Client($echo->addresses['shm'], ['persistent' => true]);
$c->call('x');
$d = new Shmlink\Client($echo->addresses['unix']);
$d->close();
try {
    $d->call('x');
} catch (Shmlink\ClosedException $e) {
}
ob_start();
phpinfo(INFO_MODULES);
$info = ob_get_clean();
preg_match('/^shmlink$.*?(?=^\S+$\n\n|\z)/ms', $info, $m);
echo $m[0] ?? "no shmlink section\n";
echo "matches shmlink_version style: ", preg_match('/^library version => \d+\.\d+\.\d+/m', $info), "\n";
?>
--EXPECTF--
shmlink

shmlink support => enabled
extension version => %d.%d.%d
library version => %d.%d.%d

counter (this process) => value
connects => 2
persistent_reuses => 0
reconnects => 0
calls => 1
errors => 1
persistent_sessions => 1
%A
matches shmlink_version style: 1
