<?php
/* The worker of the pool's hot-upgrade benchmark: echoes each call's
 * request, and answers each HTTP request from the pool's front with a
 * short text. */

declare(strict_types=1);

(new Shmlink\Worker())->run(static fn (Shmlink\HttpRequest|string $r): Shmlink\HttpResponse|string =>
    is_string($r) ? $r : new Shmlink\HttpResponse(200, "ok\n", ['Content-Type' => 'text/plain']));
