<?php
// A Laravel application as a worker of `shmlink pool --http`:
//     shmlink pool --http 127.0.0.1:8080 --workers 4 -- \
//         php bindings/php/lib/bin/laravel-worker.php /path/to/app
// (in a Composer install: vendor/bin/shmlink-laravel-worker /path/to/app).
// The application's vendor/autoload.php is loaded first; the shmlink
// library comes from it, or from this file's own directory.

declare(strict_types=1);

$base = $argv[1] ?? getenv('APP_BASE_PATH') ?: '';
if ($base === '' || !is_file("$base/bootstrap/app.php")) {
    fwrite(STDERR, "usage: laravel-worker.php APP_BASE_PATH (a directory with bootstrap/app.php); got '$base'\n");
    exit(2);
}
$base = realpath($base);
require $base . '/vendor/autoload.php';
if (!class_exists(Shmlink\Laravel\Worker::class)) {
    require dirname(__DIR__) . '/autoload.php';
}
exit((new Shmlink\Laravel\Worker($base))->run());
