<?php
/* App (c): a leak, as long-lived workers meet them: a cache that never
 * evicts keeps 64 KiB more with every request. Under PHP-FPM the memory
 * goes with the request; under shmlink pool the worker grows until
 * --max-memory recycles it. */

declare(strict_types=1);

$kept = [];

return static function () use (&$kept): array {
    $kept[] = str_repeat(chr(count($kept) % 256), 65536);
    return [200, 'text/plain; charset=UTF-8', 'kept ' . count($kept) . " blocks\n"];
};
