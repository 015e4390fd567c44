<?php
/* A long-lived PHP worker for `shmlink pool`: it builds a table of 50,000
 * entries once, at start, and then answers lookups from it, call after
 * call, without rebuilding anything (what PHP-FPM would redo per request).
 *
 *   shmlink pool --listen shm:/tmp/lookup.sock --workers 2 -- \
 *       php -d extension=shmlink.so -d opcache.enable_cli=1 examples/php-worker/worker.php
 *   shmlink call shm:/tmp/lookup.sock key:12345      # -> value:12345:...
 *
 * Requests: "key:N" answers "value:N:<the entry>"; an unknown key is a
 * remote error 404; "ping" answers "pong"; anything else is echoed. */

declare(strict_types=1);

$table = [];
for ($i = 0; $i < 50000; $i++) {
    $table["key:$i"] = sprintf('value:%d:%08x', $i, crc32("entry $i"));
}
fwrite(STDERR, sprintf("worker %d: table of %d entries ready\n", getmypid(), count($table)));

$worker = new Shmlink\Worker();
$worker->run(function (string $request) use ($table): string {
    if ($request === 'ping') {
        return 'pong';
    }
    if (str_starts_with($request, 'key:')) {
        return $table[$request] ?? throw new RuntimeException("no entry $request", 404);
    }
    return $request;
});
fwrite(STDERR, sprintf("worker %d: told to stop\n", getmypid()));
