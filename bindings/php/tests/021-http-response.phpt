--TEST--
Shmlink\HttpResponse checks what it is given; Shmlink\HttpRequest is made by the extension only; both are read-only
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';

$r = new Shmlink\HttpResponse();
var_dump($r->status, $r->body, $r->headers);
$r = new Shmlink\HttpResponse(404, 'gone', ['Content-Type' => 'text/plain', 'X-N' => 3, 'Set-Cookie' => ['a=1', 'b=2']]);
var_dump($r->status, $r->body, $r->headers);

echo shmlink_throws(fn () => new Shmlink\HttpResponse(99)), "\n";
echo shmlink_throws(fn () => new Shmlink\HttpResponse(1000)), "\n";
echo shmlink_throws(fn () => new Shmlink\HttpResponse(200, '', ['x' => "a\r\nb"])), "\n";
echo shmlink_throws(fn () => new Shmlink\HttpResponse(200, '', ['x' => ["ok", "a\nb"]])), "\n";
echo shmlink_throws(fn () => new Shmlink\HttpResponse(200, '', ['bad name' => 'v'])), "\n";
echo shmlink_throws(fn () => new Shmlink\HttpResponse(200, '', ['v'])), "\n";
echo shmlink_throws(fn () => new Shmlink\HttpResponse(200, '', ['x' => [[1]]])), "\n";
echo shmlink_throws(function () use ($r) { $r->status = 500; }), "\n";
echo shmlink_throws(fn () => $r->__construct(500)), "\n";
echo shmlink_throws(fn () => new Shmlink\HttpRequest()), "\n";
echo shmlink_throws(fn () => serialize($r)), "\n";
?>
--EXPECT--
int(200)
string(0) ""
array(0) {
}
int(404)
string(4) "gone"
array(3) {
  ["Content-Type"]=>
  string(10) "text/plain"
  ["X-N"]=>
  string(1) "3"
  ["Set-Cookie"]=>
  array(2) {
    [0]=>
    string(3) "a=1"
    [1]=>
    string(3) "b=2"
  }
}
ValueError: Shmlink\HttpResponse::__construct(): Argument #1 ($status) must be between 100 and 999, 99 given
ValueError: Shmlink\HttpResponse::__construct(): Argument #1 ($status) must be between 100 and 999, 1000 given
ValueError: Shmlink\HttpResponse::__construct(): Argument #3 ($headers) has a line break or NUL in header "x"
ValueError: Shmlink\HttpResponse::__construct(): Argument #3 ($headers) has a line break or NUL in header "x"
ValueError: Shmlink\HttpResponse::__construct(): Argument #3 ($headers) has an invalid header name "bad name"
ValueError: Shmlink\HttpResponse::__construct(): Argument #3 ($headers) must have header names as keys, 0 given
TypeError: Shmlink\HttpResponse::__construct(): Argument #3 ($headers) must map header "x" to a string or a list of strings
Error: Cannot modify readonly property Shmlink\HttpResponse::$status
Error: Cannot modify readonly Shmlink\HttpResponse
Error: Call to private Shmlink\HttpRequest::__construct() from global scope
Exception: Serialization of 'Shmlink\HttpResponse' is not allowed
