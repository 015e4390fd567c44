--TEST--
call(): 3 MB responses arrive intact on shm, unix and tcp (over shm and unix lent from the server's arena, copied once into the string), from `shmlink echo` and a PHP server; errors and small calls around them unchanged
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

$n = 3000000;
$php = PhpServer::start(function (string $r) use ($n) {
    if ($r === 'big') {
        return str_repeat("\x00\x01\xfe\xff", $n / 4);
    }
    if ($r === 'fail') {
        throw new DomainException('no such thing', 7);
    }
    return strrev($r);
});
$fixed = EchoServer::start(['--reply-size', (string)$n]); // the request repeated to $n bytes
$echo = EchoServer::start(['--reply-ratio', '1']);
$want = substr(str_repeat('shmlink!', intdiv($n, 8) + 1), 0, $n);
$random = random_bytes($n);
foreach (['shm', 'unix', 'tcp'] as $t) {
    $f = new Shmlink\Client($fixed->addresses[$t]);
    $ok = true;
    $kept = [];
    for ($i = 0; $i < 4; $i++) {
        $kept[] = $f->call('shmlink!', $i % 2 ? 10.0 : null);
    }
    foreach ($kept as $s) { // each string is a copy of its own
        $ok = $ok && $s === $want;
    }
    $e = new Shmlink\Client($echo->addresses[$t]);
    $ok = $ok && $e->call($random) === $random && $e->call('small') === 'small' && $e->call('') === '';
    $p = new Shmlink\Client($php->addresses[$t]);
    $big = $p->call('big');
    $ok = $ok && strlen($big) === $n && $big === str_repeat("\x00\x01\xfe\xff", $n / 4);
    $ok = $ok && $p->call('abc') === 'cba';
    echo "$t: ", $ok ? 'ok' : 'FAIL', "\n";
    echo '  ', shmlink_throws(fn () => $p->call('fail')), "\n";
    echo '  then: ', strlen($p->call('big')), ' bytes, ', $p->call('xyz'), "\n";
}
$st = Shmlink\stats();
echo "calls={$st['calls']} errors={$st['errors']}\n";
?>
--EXPECT--
shm: ok
  Shmlink\RemoteException: remote error 7: no such thing
  then: 3000000 bytes, zyx
unix: ok
  Shmlink\RemoteException: remote error 7: no such thing
  then: 3000000 bytes, zyx
tcp: ok
  Shmlink\RemoteException: remote error 7: no such thing
  then: 3000000 bytes, zyx
calls=33 errors=3
