--TEST--
Classes, exception hierarchy, initial stats; clients cannot be cloned or serialized
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';

foreach (['Client', 'Server'] as $c) {
    $r = new ReflectionClass("Shmlink\\$c");
    echo $r->getName(), ' final=', var_export($r->isFinal(), true), "\n";
}
foreach (['Exception', 'ConnectException', 'TimeoutException', 'ClosedException',
          'RemoteException', 'ProtocolException'] as $c) {
    echo "Shmlink\\$c: ", get_parent_class("Shmlink\\$c"), "\n";
}
var_dump(Shmlink\stats());

$echo = EchoServer::start();
$c = new Shmlink\Client($echo->addresses['unix']);
echo shmlink_throws(fn () => clone $c), "\n";
echo shmlink_throws(fn () => serialize($c)), "\n";
echo shmlink_throws(fn () => $c->nope = 1), "\n";
echo shmlink_throws(fn () => $c->__construct($echo->addresses['unix'])), "\n";
echo shmlink_throws(fn () => (new ReflectionClass(Shmlink\Client::class))->newInstanceWithoutConstructor()), "\n";
?>
--EXPECT--
Shmlink\Client final=true
Shmlink\Server final=true
Shmlink\Exception: RuntimeException
Shmlink\ConnectException: Shmlink\Exception
Shmlink\TimeoutException: Shmlink\Exception
Shmlink\ClosedException: Shmlink\Exception
Shmlink\RemoteException: Shmlink\Exception
Shmlink\ProtocolException: Shmlink\Exception
array(6) {
  ["connects"]=>
  int(0)
  ["persistent_reuses"]=>
  int(0)
  ["reconnects"]=>
  int(0)
  ["calls"]=>
  int(0)
  ["errors"]=>
  int(0)
  ["persistent_sessions"]=>
  int(0)
}
Error: Trying to clone an uncloneable object of class Shmlink\Client
Exception: Serialization of 'Shmlink\Client' is not allowed
Error: Cannot create dynamic property Shmlink\Client::$nope
Error: Shmlink\Client::__construct() cannot be called twice
ReflectionException: Class Shmlink\Client is an internal class marked as final that cannot be instantiated without invoking its constructor
