<?php

/**
 * The API of the shmlink extension: the source of truth for
 * shmlink_arginfo.h (regenerate with tools/gen-arginfo.sh).
 *
 * @generate-class-entries
 */

namespace Shmlink {
    /**
     * A client session to one server.
     *
     * @strict-properties
     * @not-serializable
     */
    final class Client
    {
        /**
         * $address: "shm:/path", "unix:/path" or "tcp:host:port".
         * $options: timeout (float seconds, default 5.0), persistent (bool,
         * default false), wait ("sleep" | "spin" | "busy"), ring_size (int
         * bytes, a power of two), max_message_size (int bytes).
         */
        public function __construct(string $address, array $options = []) {}

        /** Sends $request and waits for its response. */
        public function call(string $request, ?float $timeout = null): string {}

        /** Sends $request without waiting (pipelining); returns the call id. */
        public function send(string $request): int {}

        /** The next response of a sent call; $id receives its call id. */
        public function receive(?int &$id = null, ?float $timeout = null): string {}

        /**
         * The next response of a sent call if one has arrived, never
         * waiting for one: [int $id, string $response], or null when none
         * has (then stream() becomes readable when one does) or no call is
         * in flight. A remote error throws RemoteException with the call's
         * id as its callId.
         */
        public function tryReceive(): ?array {}

        /**
         * Gives up on a call sent with send(): its response is dropped when
         * it comes (or now, if it came). True when the call was in flight.
         */
        public function abandon(int $id): bool {}

        /**
         * A read-only stream for stream_select() and event loops (ReactPHP,
         * amphp, Revolt) to watch, never to read: readable when a response
         * has begun to arrive after tryReceive() returned null, or when the
         * session ends. The same stream each time; closed with the client;
         * fclose() on it leaves the client open.
         *
         * @return resource
         */
        public function stream() {}

        /** Sends a one-way message: no response. */
        public function notify(string $message): void {}

        public function isConnected(): bool {}

        /**
         * The transport the session really uses: "shm", "unix" (also an shm:
         * session the server could give no shared memory, which continues over
         * its socket) or "tcp"; null when closed or busy.
         */
        public function transport(): ?string {}

        public function close(): void {}
    }

    /**
     * A server answering requests with a PHP callable.
     *
     * @strict-properties
     * @not-serializable
     */
    final class Server
    {
        /**
         * $options: allowed_uids (int[]), allowed_gids (int[]), socket_mode
         * (int), socket_group (int), max_sessions (int), wait ("sleep" |
         * "spin" | "busy"), max_message_size (int bytes).
         */
        public function __construct(string|array $addresses, array $options = []) {}

        /** The bound addresses, with the real port of "tcp:HOST:0". */
        public function addresses(): array {}

        /**
         * Answers requests with $handler(string $request): string until
         * stop(). A thrown exception becomes an error response.
         */
        public function serve(callable $handler): void {}

        /** Makes serve() return once the calls in flight are answered. */
        public function stop(): void {}
    }

    /**
     * A worker of a `shmlink pool`: answers the calls the pool hands it, on
     * this thread, waiting on its shared-memory ring directly.
     *
     * @strict-properties
     * @not-serializable
     */
    final class Worker
    {
        /**
         * Connects to the pool at $address, or, when null, at the address in
         * the environment variable SHMLINK_WORKER (which the pool sets).
         * $options: timeout (float seconds: connecting, and writing an
         * answer), wait ("sleep" | "spin" | "busy"), ring_size,
         * max_message_size.
         */
        public function __construct(?string $address = null, array $options = []) {}

        /**
         * Answers calls with $handler(string $request): string until the pool
         * tells this worker to stop (recycling, reload, shutdown), then
         * returns. An exception thrown by $handler reaches the caller as a
         * Shmlink\RemoteException with its message and code (or 0xFFFF0003
         * when the code is 0), and the worker goes on.
         */
        public function run(callable $handler): void {}

        /**
         * The next call's request: a Shmlink\HttpRequest when it came from
         * the pool's HTTP front (`shmlink pool --http`), else a string; null
         * when the pool told this worker to stop.
         */
        public function accept(): HttpRequest|string|null {}

        /**
         * Answers the call accepted last. An HTTP call takes a string (200,
         * text/html; charset=UTF-8) or a Shmlink\HttpResponse; another call
         * a string.
         */
        public function respond(string|HttpResponse $response): void {}

        /** Answers the call accepted last with an error: the caller gets a RemoteException. */
        public function fail(int $code, string $message): void {}

        /**
         * Starts streaming the answer to the HTTP request being handled: the
         * status and headers of $head (a string: 200 and what header() and
         * http_response_code() set; or a Shmlink\HttpResponse) go to the
         * client now, with its body as the first bytes; write() sends more,
         * end() (or the handler's return, whose body is the last piece) ends
         * it. flush() in a request does the same with what the output
         * buffers hold. Throws Shmlink\Exception when the client is gone.
         */
        public function stream(string|HttpResponse $head = ""): void {}

        /** Sends the next piece of the response being streamed. */
        public function write(string $data): void {}

        /** Ends the response being streamed. */
        public function end(): void {}
    }

    /**
     * An HTTP request from the pool's HTTP front, as a worker's handler
     * receives it. Made by the extension only.
     *
     * @strict-properties
     * @not-serializable
     */
    final class HttpRequest
    {
        /** "GET", "POST", ... */
        public readonly string $method;
        /** The request target as sent: path and query ("/a/b?x=1"). */
        public readonly string $uri;
        /** The target before "?". */
        public readonly string $path;
        /** The target after "?" ("" when none). */
        public readonly string $query;
        /** "HTTP/1.1" or "HTTP/1.0". */
        public readonly string $protocol;
        /** Lower-case header names => list of their values, in order. */
        public readonly array $headers;
        public readonly string $body;
        /** The client's "IP:PORT". */
        public readonly string $remoteAddr;

        private function __construct() {}

        /** The first value of header $name (any case), or null. */
        public function header(string $name): ?string {}

        /**
         * The body as a readable stream, from its start: from memory, or,
         * for a body the pool's server spooled to a file (over
         * --http-spool-over: $body is then "" and header
         * x-shmlink-body-file names the file), from that file, never
         * loaded whole.
         *
         * @return resource
         */
        public function bodyStream() {}

        /**
         * Fills $_SERVER (REQUEST_METHOD, REQUEST_URI, QUERY_STRING,
         * SERVER_PROTOCOL, REMOTE_ADDR, REMOTE_PORT, HTTP_*, CONTENT_TYPE,
         * CONTENT_LENGTH, REQUEST_TIME, REQUEST_TIME_FLOAT over the worker's
         * own environment), $_GET, $_POST (urlencoded and multipart
         * bodies), $_FILES (uploads saved to upload_tmp_dir, removed after
         * the call, move_uploaded_file() works), $_COOKIE and $_REQUEST from
         * this request, replacing the previous request's; php://input reads
         * the body (a spooled one from its file).
         */
        public function globals(): void {}
    }

    /**
     * What a worker's handler answers an HTTP call with (a string answers
     * 200 with Content-Type text/html; charset=UTF-8).
     *
     * @strict-properties
     * @not-serializable
     */
    final class HttpResponse
    {
        public readonly int $status;
        public readonly string $body;
        /** Header names => a value or a list of values. */
        public readonly array $headers;

        /**
         * $status: 100..999. $headers: name => string or list of strings;
         * without a Content-Type, text/html; charset=UTF-8 is sent.
         */
        public function __construct(int $status = 200, string $body = '', array $headers = []) {}
    }

    class Exception extends \RuntimeException {}

    /** Cannot connect, or refused by the server's policy. */
    class ConnectException extends Exception {}

    class TimeoutException extends Exception {}

    /** The peer is gone or the client was closed. */
    class ClosedException extends Exception {}

    /**
     * The handler answered with an error: getCode() is its code. The
     * reserved codes are constants here (docs/protocol.md, "Errors and
     * codes"), e.g. RemoteException::WORKER_DIED.
     */
    class RemoteException extends Exception
    {
        /** @var int
         * @cvalue SHMLINK_REMOTE_CLOSED
         */
        public const CLOSED = UNKNOWN;
        /** @var int
         * @cvalue SHMLINK_REMOTE_HANDLER_PANICKED
         */
        public const HANDLER_PANICKED = UNKNOWN;
        /** @var int
         * @cvalue SHMLINK_REMOTE_RESPONSE_TOO_LARGE
         */
        public const RESPONSE_TOO_LARGE = UNKNOWN;
        /** @var int
         * @cvalue SHMLINK_REMOTE_HANDLER_EXCEPTION
         */
        public const HANDLER_EXCEPTION = UNKNOWN;
        /** @var int
         * @cvalue SHMLINK_REMOTE_PROTOCOL_ERROR
         */
        public const PROTOCOL_ERROR = UNKNOWN;
        /** @var int
         * @cvalue SHMLINK_REMOTE_SHUTTING_DOWN
         */
        public const SHUTTING_DOWN = UNKNOWN;
        /** @var int
         * @cvalue SHMLINK_REMOTE_NOT_ANSWERED
         */
        public const NOT_ANSWERED = UNKNOWN;
        /** @var int
         * @cvalue SHMLINK_REMOTE_NO_WORKER
         */
        public const NO_WORKER = UNKNOWN;
        /** @var int
         * @cvalue SHMLINK_REMOTE_QUEUE_FULL
         */
        public const QUEUE_FULL = UNKNOWN;
        /** @var int
         * @cvalue SHMLINK_REMOTE_WORKER_DIED
         */
        public const WORKER_DIED = UNKNOWN;
        /** @var int
         * @cvalue SHMLINK_REMOTE_WORKER_TIMEOUT
         */
        public const WORKER_TIMEOUT = UNKNOWN;
        /** @var int
         * @cvalue SHMLINK_REMOTE_POOL_STOPPING
         */
        public const POOL_STOPPING = UNKNOWN;
        /** @var int
         * @cvalue SHMLINK_REMOTE_NO_WORKERS_START
         */
        public const NO_WORKERS_START = UNKNOWN;
        /** @var int
         * @cvalue SHMLINK_REMOTE_UNKNOWN_COMMAND
         */
        public const UNKNOWN_COMMAND = UNKNOWN;

        /**
         * The id of the failed call when it was received with receive() or
         * tryReceive() (null from call()).
         */
        public ?int $callId = null;
    }

    class ProtocolException extends Exception {}

    /** This process's counters. */
    function stats(): array {}
}
