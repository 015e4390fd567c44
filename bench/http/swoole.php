<?php
/* The Swoole baseline of the HTTP benchmark (issue 32): bootstraps the app
 * given as the first argument once per worker, then answers every request
 * with it through the classic superglobals, filled from Swoole's request as
 * an adapter must ($_GET, $_POST, $_COOKIE, $_FILES, $_SERVER with the
 * request's variables and HTTP_* headers), so the app runs unchanged as it
 * does under bench/http/worker.php and bench/http/fpm.php.
 *
 *   php -d extension=swoole.so swoole.php APP.php PORT base|process WORKERS
 *
 * Swoole is a baseline only: users install it with `pecl install swoole`;
 * the main job builds it from ../shared/anchors when that is at hand. */

declare(strict_types=1);

[, $appFile, $port, $mode, $workers] = $argv + [null, null, null, 'base', '2'];
$server = new Swoole\Http\Server('127.0.0.1', (int)$port,
    $mode === 'process' ? SWOOLE_PROCESS : SWOOLE_BASE);
$server->set([
    'worker_num' => (int)$workers,
    'log_level' => SWOOLE_LOG_WARNING,
    'http_compression' => false,
    // The same limit as the pool's default --http-max-body.
    'package_max_length' => 8 * 1024 * 1024,
]);
$app = null;
$server->on('workerStart', static function () use ($appFile, &$app): void {
    $app = require $appFile;
});
$base = $_SERVER;
unset($base['argv'], $base['argc']);
$server->on('request', static function (Swoole\Http\Request $request, Swoole\Http\Response $response)
        use (&$app, $base): void {
    $_GET = $request->get ?? [];
    $_POST = $request->post ?? [];
    $_COOKIE = $request->cookie ?? [];
    $_FILES = $request->files ?? [];
    $_REQUEST = $_GET + $_POST;
    $server = $base;
    foreach ($request->server as $name => $value) {
        $server[strtoupper($name)] = $value;
    }
    foreach ($request->header as $name => $value) {
        $server['HTTP_' . strtoupper(str_replace('-', '_', $name))] = $value;
    }
    $_SERVER = $server;
    [$status, $type, $body] = $app();
    $response->status($status);
    $response->header('Content-Type', $type);
    $response->end($body);
});
$server->start();
