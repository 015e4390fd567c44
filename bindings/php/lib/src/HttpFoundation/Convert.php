<?php
// Shmlink\HttpRequest <-> Symfony HttpFoundation.

declare(strict_types=1);

namespace Shmlink\HttpFoundation;

use Shmlink\Failure;
use Shmlink\HttpRequest;
use Shmlink\HttpResponse;
use Symfony\Component\HttpFoundation\Request;
use Symfony\Component\HttpFoundation\Response;

/** Requests and responses of HttpFoundation (Symfony's, and Laravel's on top of it). */
final class Convert
{
    /**
     * The request as PHP-FPM would give it to `Request::createFromGlobals()`:
     * the superglobals filled by the extension (query, form fields, cookies,
     * uploaded files, server params), and the body, which a CLI worker's
     * php://input does not carry.
     */
    public static function request(HttpRequest $call): Request
    {
        $call->globals();
        // A body the server spooled to a file is read from it, never whole.
        $content = $call->header('x-shmlink-body-file') !== null ? $call->bodyStream() : $call->body;
        $request = new Request($_GET, $_POST, [], $_COOKIE, $_FILES, $_SERVER, $content);
        // As createFromGlobals() does for the methods PHP itself does not parse.
        $type = strtolower((string) $request->headers->get('CONTENT_TYPE', ''));
        $method = strtoupper($call->method);
        if (str_starts_with($type, 'application/x-www-form-urlencoded')
            && in_array($method, ['PUT', 'DELETE', 'PATCH'], true)) {
            parse_str($request->getContent(), $data);
            $request->request->replace($data);
        }
        return $request;
    }

    /**
     * The response as the front sends it: status, headers with every
     * cookie, and the body whatever the response's kind (a
     * StreamedResponse or BinaryFileResponse writes it out: captured),
     * after what the request printed before (`$printed`).
     */
    public static function response(Response $response, string $printed = ''): HttpResponse
    {
        $headers = $response->headers->allPreserveCaseWithoutCookies();
        $cookies = array_map('strval', $response->headers->getCookies());
        if ($cookies !== []) {
            $headers['Set-Cookie'] = $cookies;
        }
        ob_start();
        try {
            $response->sendContent();
        } finally {
            $body = (string) ob_get_clean();
        }
        return new HttpResponse($response->getStatusCode(), $printed . $body, $headers);
    }

    /**
     * Answers a request whose handling threw past the framework's own error
     * handling: a plain 500 (unless the response went out already), the
     * reason on stderr, which the pool logs.
     */
    public static function failed(\Shmlink\Worker $worker, HttpRequest $call, \Throwable $e, bool $answered = false): void
    {
        Failure::log($call, $e);
        if (!$answered) {
            $worker->respond(Failure::response());
        }
    }
}
