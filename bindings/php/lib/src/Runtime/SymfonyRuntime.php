<?php
// The Symfony Runtime of a Symfony application under shmlink pool --http.

declare(strict_types=1);

namespace Shmlink\Runtime;

use Shmlink\Runtime\Symfony\KernelRunner;
use Symfony\Component\HttpKernel\HttpKernelInterface;
use Symfony\Component\Runtime\RunnerInterface;

/**
 * Runs an application's unchanged `public/index.php` as a worker of
 * `shmlink pool --http`:
 *
 *     APP_RUNTIME='Shmlink\Runtime\SymfonyRuntime' \
 *         shmlink pool --http 127.0.0.1:8080 --workers 4 -- php public/index.php
 *
 * The kernel boots once per worker and serves request after request; its
 * `terminate()` runs after each response was sent, and the container's
 * `services_resetter` between requests. Everything else (the environment,
 * dotenv, the error handler, console commands) is Symfony's own runtime.
 * Outside a pool (no SHMLINK_WORKER in the environment) it behaves exactly
 * as Symfony's runtime.
 */
class SymfonyRuntime extends \Symfony\Component\Runtime\SymfonyRuntime
{
    public function getRunner(?object $application): RunnerInterface
    {
        if ($application instanceof HttpKernelInterface && getenv('SHMLINK_WORKER') !== false) {
            return new KernelRunner($application, new \Shmlink\Worker());
        }
        return parent::getRunner($application);
    }
}
