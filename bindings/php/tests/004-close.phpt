--TEST--
close(), isConnected(), and every use after close: ClosedException
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';

$echo = EchoServer::start();
foreach (['shm', 'unix', 'tcp'] as $t) {
    $c = new Shmlink\Client($echo->addresses[$t]);
    echo "$t: connected=", var_export($c->isConnected(), true);
    $c->close();
    $c->close(); // twice is fine
    echo " after close=", var_export($c->isConnected(), true),
        " transport=", var_export($c->transport(), true), "\n";
    foreach ([fn () => $c->call('x'), fn () => $c->send('x'), fn () => $c->receive(),
              fn () => $c->notify('x')] as $f) {
        echo "  ", shmlink_throws($f), "\n";
    }
}
$st = Shmlink\stats();
echo "errors={$st['errors']}\n";
?>
--EXPECTF--
shm: connected=true after close=false transport=NULL
  Shmlink\ClosedException: client of shm:%s/shm.sock was closed with Shmlink\Client::close()
  Shmlink\ClosedException: client of shm:%s/shm.sock was closed with Shmlink\Client::close()
  Shmlink\ClosedException: client of shm:%s/shm.sock was closed with Shmlink\Client::close()
  Shmlink\ClosedException: client of shm:%s/shm.sock was closed with Shmlink\Client::close()
unix: connected=true after close=false transport=NULL
  Shmlink\ClosedException: client of unix:%s/unix.sock was closed with Shmlink\Client::close()
  Shmlink\ClosedException: client of unix:%s/unix.sock was closed with Shmlink\Client::close()
  Shmlink\ClosedException: client of unix:%s/unix.sock was closed with Shmlink\Client::close()
  Shmlink\ClosedException: client of unix:%s/unix.sock was closed with Shmlink\Client::close()
tcp: connected=true after close=false transport=NULL
  Shmlink\ClosedException: client of tcp:127.0.0.1:%d was closed with Shmlink\Client::close()
  Shmlink\ClosedException: client of tcp:127.0.0.1:%d was closed with Shmlink\Client::close()
  Shmlink\ClosedException: client of tcp:127.0.0.1:%d was closed with Shmlink\Client::close()
  Shmlink\ClosedException: client of tcp:127.0.0.1:%d was closed with Shmlink\Client::close()
errors=12
