<?php
// The bound of bench/http/frameworks.sh: an application's own work per
// request in a process that booted it once, as a pool worker does, with no
// server, socket or HTTP parsing around it. The application is booted as
// the worker boots it (Symfony: its Kernel, handled and terminated per
// request, the kernel resetting its services itself; Laravel: the same
// sandbox per request as Shmlink\Laravel\Worker), then handles the
// benchmark's request for SECONDS after a warm-up; prints one JSON line:
//   {"app": ..., "requests": N, "cpu_us_per_request": X, "wall_us_per_request": Y, "status": 200}
// where the CPU time is this process's (user + system, getrusage).
//   php app-floor.php symfony APP_DIR PATH SECONDS
//   php app-floor.php laravel APP_DIR PATH SECONDS  (SHMLINK_PHP_LIB: the library, for its Sandbox)

declare(strict_types=1);

[, $app, $dir, $path, $seconds] = $argv + [null, null, null, null, '2'];
if (!in_array($app, ['symfony', 'laravel'], true) || $dir === null || $path === null) {
    fwrite(STDERR, "usage: app-floor.php symfony|laravel APP_DIR PATH [SECONDS]\n");
    exit(2);
}

/** @return callable(): int one request handled and terminated; its status */
function symfony_handler(string $dir, string $path): callable
{
    require $dir . '/vendor/autoload.php';
    $kernel = new \App\Kernel('prod', false);
    return static function () use ($kernel, $path): int {
        $request = \Symfony\Component\HttpFoundation\Request::create($path);
        ob_start();
        $response = $kernel->handle($request);
        ob_end_clean();
        $kernel->terminate($request, $response);
        return $response->getStatusCode();
    };
}

/** @return callable(): int */
function laravel_handler(string $dir, string $path): callable
{
    require $dir . '/vendor/autoload.php';
    $lib = getenv('SHMLINK_PHP_LIB') ?: dirname(__DIR__, 2) . '/bindings/php/lib';
    if (!class_exists(\Shmlink\Laravel\Sandbox::class)) {
        require $lib . '/autoload.php';
    }
    $app = require $dir . '/bootstrap/app.php';
    $app->make(\Illuminate\Contracts\Http\Kernel::class)->bootstrap();
    return static function () use ($app, $path): int {
        try {
            $sandbox = \Shmlink\Laravel\Sandbox::of($app);
            $kernel = $sandbox->make(\Illuminate\Contracts\Http\Kernel::class);
            $request = \Illuminate\Http\Request::create($path);
            ob_start();
            $response = $kernel->handle($request);
            ob_end_clean();
            $kernel->terminate($request, $response);
            return $response->getStatusCode();
        } finally {
            \Shmlink\Laravel\Sandbox::enter($app);
        }
    };
}

function cpu_us(): float
{
    $u = getrusage();
    return $u['ru_utime.tv_sec'] * 1e6 + $u['ru_utime.tv_usec'] + $u['ru_stime.tv_sec'] * 1e6 + $u['ru_stime.tv_usec'];
}

$handle = $app === 'symfony' ? symfony_handler($dir, $path) : laravel_handler($dir, $path);
// Warm-up: OPcache, the kernel's lazy services, Twig's compiled templates.
$deadline = hrtime(true) + 500_000_000;
do {
    $status = $handle();
} while (hrtime(true) < $deadline);
if ($status !== 200) {
    fwrite(STDERR, "app-floor: $app answered $path with $status\n");
    exit(1);
}
$n = 0;
$c0 = cpu_us();
$t0 = hrtime(true);
$deadline = $t0 + (int) ((float) $seconds * 1e9);
do {
    $status = $handle();
    $n++;
} while (hrtime(true) < $deadline && $status === 200);
$wall = (hrtime(true) - $t0) / 1e3;
$cpu = cpu_us() - $c0;
echo json_encode(['app' => $app, 'requests' => $n, 'cpu_us_per_request' => $cpu / $n,
    'wall_us_per_request' => $wall / $n, 'status' => $status]), "\n";
exit($status === 200 ? 0 : 1);
