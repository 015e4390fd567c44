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

        /** Sends a one-way message: no response. */
        public function notify(string $message): void {}

        public function isConnected(): bool {}

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

        /** The next call's request; null when the pool told this worker to stop. */
        public function accept(): ?string {}

        /** Answers the call accepted last. */
        public function respond(string $response): void {}

        /** Answers the call accepted last with an error: the caller gets a RemoteException. */
        public function fail(int $code, string $message): void {}
    }

    class Exception extends \RuntimeException {}

    /** Cannot connect, or refused by the server's policy. */
    class ConnectException extends Exception {}

    class TimeoutException extends Exception {}

    /** The peer is gone or the client was closed. */
    class ClosedException extends Exception {}

    /** The handler answered with an error: getCode() is its code. */
    class RemoteException extends Exception {}

    class ProtocolException extends Exception {}

    /** This process's counters. */
    function stats(): array {}
}
