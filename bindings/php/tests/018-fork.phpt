--TEST--
pcntl_fork(): a child cannot use or close the sessions it inherited, and exits without ending them; the parent's stay intact
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

$echo = EchoServer::start(['--reply-ratio', '1']);
$plain = new Shmlink\Client($echo->addresses['unix']);
$kept = new Shmlink\Client($echo->addresses['shm'], ['persistent' => true]);
echo "parent: ", $plain->call('a'), $kept->call('b'), "\n";
$result = "$echo->dir/child-result";

$pid = pcntl_fork();
if ($pid === 0) {
    $lines = [];
    $lines[] = 'call: ' . shmlink_throws(fn () => $plain->call('from the child'));
    $lines[] = 'connected: ' . var_export($plain->isConnected(), true);
    $before = Shmlink\stats()['connects'];
    $mine = new Shmlink\Client($echo->addresses['shm'], ['persistent' => true]);
    $lines[] = 'own persistent client: ' . $mine->call('c') . ', new connect: '
        . var_export(Shmlink\stats()['connects'] === $before + 1, true);
    $kept->close(); // leaves the parent's session alone
    file_put_contents($result, implode("\n", $lines) . "\n");
    // A normal exit frees the inherited sessions too: only the child's
    // copies are released (shmlink_client_forget), no goodbye reaches the
    // server, so the parent's sessions below go on.
    exit(0);
}
pcntl_waitpid($pid, $status);
echo file_get_contents($result);
echo "parent after the child: ", $plain->call('d'), $kept->call('e'),
    ", connected: ", var_export($plain->isConnected() && $kept->isConnected(), true), "\n";
?>
--EXPECTF--
parent: ab
call: Shmlink\ClosedException: client of unix:%s/unix.sock belongs to the process that opened it, not to this forked child: open a new Shmlink\Client here
connected: false
own persistent client: c, new connect: true
parent after the child: de, connected: true
