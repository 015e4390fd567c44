<?php
/* The shmlink pool front of the HTTP benchmark's apps: bootstraps the app
 * given as the first argument once, then answers every request from the
 * pool's HTTP front with it, through the classic superglobals.
 *
 *   shmlink pool --http HOST:PORT -- php -d opcache.enable_cli=1 worker.php APP.php */

declare(strict_types=1);

$app = require $argv[1];
(new Shmlink\Worker())->run(static function (Shmlink\HttpRequest $request) use ($app): Shmlink\HttpResponse {
    $request->globals();
    [$status, $type, $body] = $app();
    return new Shmlink\HttpResponse($status, $body, ['Content-Type' => $type]);
});
