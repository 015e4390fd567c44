<?php
// A PSR-15 application as a worker of `shmlink pool --http`.

declare(strict_types=1);

namespace Shmlink\Psr7;

use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestFactoryInterface;
use Psr\Http\Message\StreamFactoryInterface;
use Psr\Http\Message\UploadedFileFactoryInterface;
use Psr\Http\Server\RequestHandlerInterface;
use Shmlink\Failure;
use Shmlink\HttpCalls;
use Shmlink\HttpRequest;
use Shmlink\HttpResponse;
use Throwable;

/**
 * The worker loop of a PSR-15 application: each request the pool hands this
 * worker becomes a PSR-7 ServerRequestInterface (made with the PSR-17
 * factories given, any implementation), the handler answers it, and its
 * response goes back to the pool's HTTP front.
 *
 * ```php
 * $f = new Nyholm\Psr7\Factory\Psr17Factory();
 * (new Shmlink\Psr7\Worker($f, $f, $f))->run($app); // $app: RequestHandlerInterface
 * ```
 *
 * An exception the handler throws is answered 500 (its text goes to the
 * worker's stderr, which the pool logs, never to the client), and the
 * worker goes on. `run()` returns when the pool tells the worker to stop.
 */
final class Worker
{
    private readonly RequestBuilder $builder;
    private readonly \Shmlink\Worker $worker;

    /**
     * @param \Shmlink\Worker|null $worker the pool connection (default: a new
     *                                     one to the address in $SHMLINK_WORKER)
     */
    public function __construct(
        ServerRequestFactoryInterface $requests,
        StreamFactoryInterface $streams,
        UploadedFileFactoryInterface $uploads,
        ?\Shmlink\Worker $worker = null,
    ) {
        $this->builder = new RequestBuilder($requests, $streams, $uploads);
        $this->worker = $worker ?? new \Shmlink\Worker();
    }

    /** Serves requests with $handler until the pool stops this worker. */
    public function run(RequestHandlerInterface $handler): void
    {
        HttpCalls::each($this->worker, fn (HttpRequest $call) => $this->worker->respond($this->answer($handler, $call)));
    }

    /** The handler's answer to one request, as the front sends it. */
    private function answer(RequestHandlerInterface $handler, HttpRequest $call): HttpResponse
    {
        try {
            return self::toShmlink($handler->handle($this->builder->build($call)));
        } catch (Throwable $e) {
            Failure::log($call, $e);
            return Failure::response();
        }
    }

    /** A PSR-7 response as the extension's: status, every header, the whole body. */
    private static function toShmlink(ResponseInterface $response): HttpResponse
    {
        $body = $response->getBody();
        if ($body->isSeekable()) {
            $body->rewind();
        }
        $bytes = $body->getContents();
        $body->close();
        $headers = [];
        foreach ($response->getHeaders() as $name => $values) {
            $headers[(string) $name] = array_values($values);
        }
        return new HttpResponse($response->getStatusCode(), $bytes, $headers);
    }
}
