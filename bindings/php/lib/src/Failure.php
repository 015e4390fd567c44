<?php
// What every runner does with an exception past the application's own
// error handling.

declare(strict_types=1);

namespace Shmlink;

use Throwable;

/**
 * An exception no handler of the application caught: its line goes to the
 * worker's stderr (the pool's log), never to the client, who gets a plain
 * 500.
 */
final class Failure
{
    /** Logs `$e`, thrown while answering `$call`. */
    public static function log(HttpRequest $call, Throwable $e): void
    {
        fwrite(STDERR, sprintf(
            "shmlink worker: %s %s: uncaught %s: %s at %s:%d\n",
            $call->method,
            $call->uri,
            $e::class,
            $e->getMessage(),
            $e->getFile(),
            $e->getLine(),
        ));
    }

    /** The answer a client gets instead. */
    public static function response(): HttpResponse
    {
        return new HttpResponse(500, "Internal Server Error\n", ['Content-Type' => 'text/plain; charset=UTF-8']);
    }
}
