<?php
// Shmlink\HttpRequest -> PSR-7 ServerRequestInterface, with any PSR-17 factories.

declare(strict_types=1);

namespace Shmlink\Psr7;

use Psr\Http\Message\ServerRequestFactoryInterface;
use Psr\Http\Message\ServerRequestInterface;
use Psr\Http\Message\StreamFactoryInterface;
use Psr\Http\Message\UploadedFileFactoryInterface;
use Psr\Http\Message\UploadedFileInterface;
use Shmlink\HttpRequest;

/**
 * Builds the PSR-7 request of each HTTP call: method, absolute URI (the
 * Host header's), protocol version, every header, the server params a
 * SAPI would give ($_SERVER's keys), query and cookie params, the body as
 * a stream, and for form bodies the parsed body and uploaded files (parsed
 * by the extension's own multipart reader, as `HttpRequest::globals()`
 * does); `HttpCalls::each` clears the superglobals after the request.
 */
final class RequestBuilder
{
    public function __construct(
        private readonly ServerRequestFactoryInterface $requests,
        private readonly StreamFactoryInterface $streams,
        private readonly UploadedFileFactoryInterface $uploads,
    ) {
    }

    public function build(HttpRequest $call): ServerRequestInterface
    {
        // The extension parses the form (urlencoded or multipart) into the
        // superglobals and spools uploads; they are read from there.
        $call->globals();
        $server = $_SERVER;
        $host = $call->header('host') ?? (($server['SERVER_NAME'] ?? 'localhost'));
        $uri = 'http://' . $host . $call->uri;
        $request = $this->requests->createServerRequest($call->method, $uri, $server)
            ->withProtocolVersion(substr($call->protocol, strlen('HTTP/')))
            ->withQueryParams($_GET)
            ->withCookieParams($_COOKIE)
            ->withBody(self::spooled($call)
                ? $this->streams->createStreamFromResource($call->bodyStream())
                : $this->streams->createStream($call->body));
        foreach ($call->headers as $name => $values) {
            $request = $request->withHeader($name, $values);
        }
        if (self::isForm($call->header('content-type')) && $call->method === 'POST') {
            $request = $request->withParsedBody($_POST);
        }
        if ($_FILES !== []) {
            $request = $request->withUploadedFiles($this->files($_FILES));
        }
        return $request;
    }

    /** Whether the server spooled the body to a file (read from it, never whole). */
    private static function spooled(HttpRequest $call): bool
    {
        return $call->header('x-shmlink-body-file') !== null;
    }

    private static function isForm(?string $type): bool
    {
        $type = strtolower(trim(explode(';', $type ?? '', 2)[0]));
        return $type === 'application/x-www-form-urlencoded' || $type === 'multipart/form-data';
    }

    /**
     * $_FILES (one entry per field; a field named `a[]` or `a[x]` holds
     * arrays of names, types, ...) as PSR-7's tree of UploadedFileInterface.
     *
     * @param array<string, array<string, mixed>> $files
     * @return array<string, mixed>
     */
    private function files(array $files): array
    {
        $tree = [];
        foreach ($files as $field => $f) {
            $tree[$field] = $this->branch($f['tmp_name'], $f['size'], $f['error'], $f['name'], $f['type']);
        }
        return $tree;
    }

    private function branch(mixed $tmp, mixed $size, mixed $error, mixed $name, mixed $type): mixed
    {
        if (!is_array($tmp)) {
            return $this->file((string) $tmp, (int) $size, (int) $error, (string) $name, (string) $type);
        }
        $out = [];
        foreach ($tmp as $k => $t) {
            $out[$k] = $this->branch($t, $size[$k], $error[$k], $name[$k], $type[$k]);
        }
        return $out;
    }

    private function file(string $tmp, int $size, int $error, string $name, string $type): UploadedFileInterface
    {
        $stream = $error === UPLOAD_ERR_OK
            ? $this->streams->createStreamFromFile($tmp, 'r')
            : $this->streams->createStream('');
        return $this->uploads->createUploadedFile($stream, $size, $error, $name, $type);
    }
}
