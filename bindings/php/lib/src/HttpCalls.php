<?php
// The loop every runner of this library serves with.

declare(strict_types=1);

namespace Shmlink;

/**
 * The HTTP calls the pool hands a worker, one after another, until the
 * pool tells it to stop. A plain call (not from the HTTP front) is refused
 * with 400; after each request the superglobals the extension filled for
 * it are cleared, so nothing of it is left for the next.
 */
final class HttpCalls
{
    /** @param callable(HttpRequest): void $serve answers the call it is given */
    public static function each(Worker $worker, callable $serve): void
    {
        while (($call = $worker->accept()) !== null) {
            if (!$call instanceof HttpRequest) {
                $worker->fail(400, 'this worker serves HTTP requests (shmlink pool --http), not plain calls');
                continue;
            }
            try {
                $serve($call);
            } finally {
                $_GET = $_POST = $_COOKIE = $_FILES = $_REQUEST = [];
            }
        }
    }
}
