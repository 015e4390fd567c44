--TEST--
Handler errors: a thrown exception becomes RemoteException with its code and message; non-string returns; notify reaches the handler
--EXTENSIONS--
shmlink
pcntl
--FILE--
<?php
require __DIR__ . '/_server.inc';

$server = PhpServer::start(function (string $request) {
    static $notes = [];
    switch ($request) {
        case 'throw':
            throw new DomainException('no such account', 404);
        case 'throw0':
            throw new LogicException('code zero');
        case 'negative':
            throw new RuntimeException('negative code', -5);
        case 'error':
            return undefined_function_xyz();
        case 'int':
            return 42;
        case 'null':
            return null;
        case 'notes':
            return implode(',', $notes);
    }
    if (str_starts_with($request, 'note:')) {
        $notes[] = substr($request, 5);
        return 'ignored';
    }
    return strrev($request);
});
foreach (['shm', 'unix', 'tcp'] as $t) {
    echo "$t:\n";
    $c = new Shmlink\Client($server->addresses[$t]);
    foreach (['throw', 'throw0', 'negative', 'error', 'int', 'null'] as $r) {
        try {
            $c->call($r);
            echo "  $r: no exception\n";
        } catch (Shmlink\RemoteException $e) {
            echo "  $r: code ", $e->getCode(), ': ', $e->getMessage(), "\n";
        }
    }
    // Pipelined: receive() reports the failed call's id before throwing.
    $id = $c->send('throw');
    try {
        $c->receive($got);
    } catch (Shmlink\RemoteException $e) {
        echo "  receive: id matches=", var_export($got === $id, true), ", code ", $e->getCode(), "\n";
    }
    $c->notify("note:$t");
    echo "  notes: ", $c->call('notes'), "; session fine: ", $c->call('abc'), "\n";
}
$st = Shmlink\stats();
echo "errors={$st['errors']}\n";
?>
--EXPECT--
shm:
  throw: code 404: remote error 404: no such account
  throw0: code 1: remote error 1: code zero
  negative: code 1: remote error 1: negative code
  error: code 1: remote error 1: Call to undefined function undefined_function_xyz()
  int: code 1: remote error 1: handler returned int, expected string
  null: code 1: remote error 1: handler returned null, expected string
  receive: id matches=true, code 404
  notes: shm; session fine: cba
unix:
  throw: code 404: remote error 404: no such account
  throw0: code 1: remote error 1: code zero
  negative: code 1: remote error 1: negative code
  error: code 1: remote error 1: Call to undefined function undefined_function_xyz()
  int: code 1: remote error 1: handler returned int, expected string
  null: code 1: remote error 1: handler returned null, expected string
  receive: id matches=true, code 404
  notes: shm,unix; session fine: cba
tcp:
  throw: code 404: remote error 404: no such account
  throw0: code 1: remote error 1: code zero
  negative: code 1: remote error 1: negative code
  error: code 1: remote error 1: Call to undefined function undefined_function_xyz()
  int: code 1: remote error 1: handler returned int, expected string
  null: code 1: remote error 1: handler returned null, expected string
  receive: id matches=true, code 404
  notes: shm,unix,tcp; session fine: cba
errors=21
