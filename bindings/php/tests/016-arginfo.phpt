--TEST--
The loaded extension declares exactly what shmlink.stub.php declares (tools/check-arginfo.php)
--EXTENSIONS--
shmlink
--FILE--
<?php
$argv = [__FILE__];
require dirname(__DIR__) . '/tools/check-arginfo.php';
?>
--EXPECT--
check-arginfo: 11 classes, 28 methods and 1 functions agree with shmlink.stub.php
