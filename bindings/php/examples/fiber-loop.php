<?php
/* Many calls at once from Fibers on one Shmlink\Client, driven by a small
 * loop on stream_select(). Each fiber reads as plain blocking code
 * ($loop->call($request) returns the response or throws); the loop keeps all
 * their calls in flight on the one session (send() never waits for an
 * answer) and resumes each fiber when its answer arrives.
 *
 *   shmlink echo --listen shm:/tmp/echo.sock --reply-ratio 1 &
 *   php -d extension=modules/shmlink.so examples/fiber-loop.php shm:/tmp/echo.sock [FIBERS]
 *
 * The same three steps fit any event loop (ReactPHP, amphp, Revolt): send()
 * the calls; take answers with tryReceive() until it returns null; then wait
 * until $client->stream() is readable (never read it) and take them again.
 * tests/037-loop-fibers.phpt runs this loop with 100 fibers. */

declare(strict_types=1);

namespace Shmlink\Examples;

use Fiber;
use Shmlink\Client;
use Shmlink\RemoteException;

final class FiberLoop
{
    /** @var array<int, Fiber> call id => the fiber waiting for its answer */
    private array $waiting = [];

    /** @var resource what stream_select() waits on */
    private $stream;

    public function __construct(private Client $client)
    {
        $this->stream = $client->stream();
    }

    /** Starts $fn in a fiber; it runs until its first call() waits. */
    public function spawn(callable $fn): Fiber
    {
        $fiber = new Fiber($fn);
        $fiber->start();
        return $fiber;
    }

    /**
     * From a fiber: sends $request and suspends until its answer comes; the
     * response, or the call's exception (a Shmlink\RemoteException, or the
     * Shmlink\Exception that ended the session) thrown here.
     */
    public function call(string $request): string
    {
        if (Fiber::getCurrent() === null) {
            throw new \LogicException('FiberLoop::call() runs in a fiber started with spawn()');
        }
        $id = $this->client->send($request);
        $this->waiting[$id] = Fiber::getCurrent();
        return Fiber::suspend();
    }

    /**
     * Gives up every call still waiting (say, after run() gave up on them):
     * their answers are dropped when they come, their fibers are let go,
     * and the client goes on. Returns how many calls were in flight.
     */
    public function abandonAll(): int
    {
        $n = 0;
        foreach (array_keys($this->waiting) as $id) {
            $n += (int)$this->client->abandon($id);
        }
        $this->waiting = [];
        return $n;
    }

    /** How many calls wait for their answer. */
    public function waiting(): int
    {
        return count($this->waiting);
    }

    /** Runs until no fiber waits for an answer; gives up after $seconds without one. */
    public function run(float $seconds = 10.0): void
    {
        for (;;) {
            $this->takeAnswers();
            if ($this->waiting === []) {
                return;
            }
            $read = [$this->stream];
            $write = $except = null;
            $n = stream_select($read, $write, $except, (int)$seconds, (int)(fmod($seconds, 1.0) * 1e6));
            if ($n === 0) {
                throw new \RuntimeException(sprintf('no answer came in %.1f s; %d calls waiting',
                    $seconds, count($this->waiting)));
            }
        }
    }

    /** Resumes the fiber of every answer that has arrived. */
    private function takeAnswers(): void
    {
        for (;;) {
            try {
                $answer = $this->client->tryReceive();
            } catch (RemoteException $e) {
                $this->resume($e->callId, $e);
                continue;
            } catch (\Shmlink\Exception $e) {
                // The session ended (the server is gone): every call fails.
                $waiting = $this->waiting;
                $this->waiting = [];
                foreach ($waiting as $fiber) {
                    $fiber->throw($e);
                }
                return;
            }
            if ($answer === null) {
                return; // none yet: the stream is readable when one comes
            }
            [$id, $response] = $answer;
            $this->resume($id, $response);
        }
    }

    private function resume(int $id, string|\Throwable $result): void
    {
        $fiber = $this->waiting[$id] ?? null;
        if ($fiber === null) {
            return;
        }
        unset($this->waiting[$id]);
        $result instanceof \Throwable ? $fiber->throw($result) : $fiber->resume($result);
    }
}

/* The demonstration: FIBERS fibers (default 100) call at once. */
if (PHP_SAPI === 'cli' && realpath($_SERVER['SCRIPT_FILENAME'] ?? '') === __FILE__) {
    if (!isset($argv[1])) {
        fwrite(STDERR, "usage: php examples/fiber-loop.php ADDRESS [FIBERS]\n");
        exit(2);
    }
    $fibers = (int)($argv[2] ?? 100);
    $loop = new FiberLoop(new Client($argv[1]));
    $answers = [];
    $t0 = hrtime(true);
    for ($i = 0; $i < $fibers; $i++) {
        $loop->spawn(function () use ($loop, $i, &$answers) {
            $answers[$i] = $loop->call("request $i");
        });
    }
    $loop->run();
    $right = 0;
    foreach ($answers as $i => $a) {
        $right += $a === "request $i";
    }
    printf("%d fibers, one session: %d answers (%d match their request) in %.1f ms\n",
        $fibers, count($answers), $right, (hrtime(true) - $t0) / 1e6);
}
