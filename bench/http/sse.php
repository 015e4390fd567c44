<?php
/* The server-sent-events endpoint of bench/http/frameworks.sh: a classic
 * script under shmlink pool --http that sends its first event with
 * flush(), works 1 s, then sends its last.
 *
 *   shmlink pool --http HOST:PORT -- php sse.php */

declare(strict_types=1);

(new Shmlink\Worker())->run(static function (Shmlink\HttpRequest $request): string {
    header('Content-Type: text/event-stream');
    header('Cache-Control: no-cache');
    ob_start();
    echo "data: first\n\n";
    flush();                      // on the wire now
    usleep(1_000_000);            // the handler's work
    echo "data: last\n\n";
    return ob_get_clean();
});
