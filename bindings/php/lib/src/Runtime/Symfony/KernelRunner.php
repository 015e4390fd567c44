<?php
// The worker loop of a Symfony HttpKernel.

declare(strict_types=1);

namespace Shmlink\Runtime\Symfony;

use Shmlink\HttpCalls;
use Shmlink\HttpFoundation\Convert;
use Shmlink\HttpRequest;
use Symfony\Component\HttpKernel\HttpKernelInterface;
use Symfony\Component\HttpKernel\TerminableInterface;
use Symfony\Component\Runtime\RunnerInterface;

/**
 * Serves the pool's HTTP requests with one kernel, booted once: each
 * request becomes an HttpFoundation Request, the kernel handles it, the
 * response goes back to the front, then the kernel terminates the request
 * (its `kernel.terminate` listeners run after the client has the answer);
 * the kernel itself resets the services tagged `kernel.reset`
 * (`services_resetter`) when it handles the next one, as it does under
 * every long-running runtime.
 */
final class KernelRunner implements RunnerInterface
{
    public function __construct(
        private readonly HttpKernelInterface $kernel,
        private readonly \Shmlink\Worker $worker,
    ) {
    }

    public function run(): int
    {
        HttpCalls::each($this->worker, fn (HttpRequest $call) => $this->serve($call));
        return 0;
    }

    /**
     * One request. What throws past the kernel's own error handling gets a
     * plain 500 if nothing was sent yet, and the log the reason.
     */
    private function serve(HttpRequest $call): void
    {
        $answered = false;
        try {
            $request = Convert::request($call);
            // What the request prints goes before the response's body, as
            // under PHP-FPM: FrameworkBundle's StreamedResponseListener
            // sends a StreamedResponse from within handle().
            ob_start();
            try {
                $response = $this->kernel->handle($request);
            } finally {
                $printed = (string) ob_get_clean();
            }
            $this->worker->respond(Convert::response($response, $printed));
            $answered = true;
            if ($this->kernel instanceof TerminableInterface) {
                $this->kernel->terminate($request, $response);
            }
        } catch (\Throwable $e) {
            Convert::failed($this->worker, $call, $e, $answered);
        }
    }
}
