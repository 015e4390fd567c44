<?php
/* App (a): hello world. Every app returns its request handler: a function of
 * the superglobals ($_GET, $_SERVER, ...) returning [status, content type,
 * body], run unchanged by bench/http/fpm.php (nginx + PHP-FPM, bootstrapping
 * per request) and bench/http/worker.php (shmlink pool, bootstrapping once). */

declare(strict_types=1);

return static fn (): array => [200, 'text/html; charset=UTF-8', 'Hello, world!'];
