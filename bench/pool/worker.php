<?php
/* The trivial worker of the pool benchmark: answers the first floor(S/8)
 * bytes of each request, as the example C++ daemon does, so the same PHP
 * client (bench/php/bench.php) checks both alike. */

declare(strict_types=1);

(new Shmlink\Worker())->run(static fn (string $request): string => substr($request, 0, intdiv(strlen($request), 8)));
