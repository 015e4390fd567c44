<?php
// A Laravel application as a worker of shmlink pool --http.

declare(strict_types=1);

namespace Shmlink\Laravel;

use Illuminate\Contracts\Http\Kernel as HttpKernel;
use Illuminate\Foundation\Application;
use Illuminate\Http\Request;
use Shmlink\HttpRequest;
use Shmlink\HttpCalls;
use Shmlink\HttpFoundation\Convert;

/**
 * Boots `bootstrap/app.php` once, then serves each request the pool hands
 * this worker on a fresh sandbox of the application (see Sandbox): the
 * response goes back, then the kernel terminates the request (terminable
 * middleware, terminating callbacks), and the sandbox is dropped.
 */
final class Worker
{
    private readonly \Shmlink\Worker $worker;

    public function __construct(private readonly string $basePath, ?\Shmlink\Worker $worker = null)
    {
        $this->worker = $worker ?? new \Shmlink\Worker();
    }

    public function run(): int
    {
        $app = require $this->basePath . '/bootstrap/app.php';
        if (!$app instanceof Application) {
            throw new \UnexpectedValueException("{$this->basePath}/bootstrap/app.php returned no Laravel application");
        }
        $app->make(HttpKernel::class)->bootstrap();
        HttpCalls::each($this->worker, function (HttpRequest $call) use ($app): void {
            try {
                $this->serve($app, $call);
            } finally {
                Sandbox::enter($app);
            }
        });
        return 0;
    }

    /**
     * One request on a fresh sandbox of $app. What throws past the
     * application's own error handling (which renders its errors itself)
     * gets a plain 500 if nothing was sent yet, and the log the reason.
     */
    private function serve(Application $app, HttpRequest $call): void
    {
        $answered = false;
        try {
            $sandbox = Sandbox::of($app);
            $kernel = $sandbox->make(HttpKernel::class);
            $request = Request::createFromBase(Convert::request($call));
            ob_start();
            try {
                $response = $kernel->handle($request);
            } finally {
                $printed = (string) ob_get_clean();
            }
            $this->worker->respond(Convert::response($response, $printed));
            $answered = true;
            $kernel->terminate($request, $response);
        } catch (\Throwable $e) {
            Convert::failed($this->worker, $call, $e, $answered);
        }
    }
}
