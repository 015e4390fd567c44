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
 * A body whose size is unknown (a generator, a pipe, an SSE stream) or
 * over 1 MiB is streamed (chunked, each read of 64 KiB sent as it comes);
 * a client that leaves mid-stream ends it, logged, and the worker goes on.
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

    /** Bodies larger than this, or of unknown size, are streamed. */
    public const STREAM_OVER = 1 << 20;
    /** Bytes read from a streamed body per piece. */
    private const PIECE = 65536;

    /** Serves requests with $handler until the pool stops this worker. */
    public function run(RequestHandlerInterface $handler): void
    {
        HttpCalls::each($this->worker, fn (HttpRequest $call) => $this->serve($handler, $call));
    }

    /** Answers one request with the handler's response. */
    private function serve(RequestHandlerInterface $handler, HttpRequest $call): void
    {
        try {
            $response = $handler->handle($this->builder->build($call));
        } catch (Throwable $e) {
            Failure::log($call, $e);
            $this->worker->respond(Failure::response());
            return;
        }
        $body = $response->getBody();
        $streaming = false;
        try {
            if ($body->isSeekable()) {
                $body->rewind();
            }
            $size = $body->getSize();
            if ($size !== null && $size <= self::STREAM_OVER) {
                $this->worker->respond(self::head($response, $body->getContents()));
                return;
            }
            $this->worker->stream(self::head($response, ''));
            $streaming = true;
            while (!$body->eof()) {
                $piece = $body->read(self::PIECE);
                if ($piece !== '') {
                    $this->worker->write($piece);
                }
            }
            $this->worker->end();
        } catch (\Shmlink\Exception $e) {
            // The client left mid-stream: nothing more to send it.
            Failure::log($call, $e);
        } catch (Throwable $e) {
            Failure::log($call, $e);
            if ($streaming) {
                // Its status went out: the response ends where it is.
                $this->worker->fail(0xFFFF0003, 'the response body failed mid-stream');
            } else {
                $this->worker->respond(Failure::response());
            }
        } finally {
            $body->close();
        }
    }

    /** A PSR-7 response's status and every header, with $bytes as the body. */
    private static function head(ResponseInterface $response, string $bytes): HttpResponse
    {
        $headers = [];
        foreach ($response->getHeaders() as $name => $values) {
            $headers[(string) $name] = array_values($values);
        }
        return new HttpResponse($response->getStatusCode(), $bytes, $headers);
    }
}
