--TEST--
amphp 2 (Debian's php-amphp-amp): Amp\Loop::onReadable() on Client::stream() drives 100 calls at once and coroutines (shm, unix, tcp)
--EXTENSIONS--
shmlink
--FILE--
<?php
require __DIR__ . '/_server.inc';
// amphp 2 declares implicitly nullable parameters, which PHP 8.4 reports as
// deprecated when it compiles amphp's files (amphp 3 fixed them; Debian 13
// no longer carries amphp, and its Debian 12 package is what the root has).
// Those notices are amphp's own: dropped for files under its directory
// only, so that every other deprecation still shows.
set_error_handler(function (int $no, string $msg, string $file): bool {
    return $no === E_DEPRECATED && str_contains($file, '/Amp/');
});
// Debian's autoloader loads the classes only, not the package's functions.
require 'Amp/autoload.php';
require_once 'Amp/functions.php';
require_once 'Amp/Internal/functions.php';

use Amp\Deferred;
use Amp\Loop;
use Amp\Promise;

/** Calls as promises: answers taken when the client's stream is readable. */
final class AmpClient
{
    /** @var array<int, Deferred> call id => its promise's resolver */
    private array $pending = [];
    private ?string $watcher = null;
    private bool $takeScheduled = false;

    public function __construct(private Shmlink\Client $client)
    {
    }

    public function call(string $request): Promise
    {
        $id = $this->client->send($request);
        $this->pending[$id] = $deferred = new Deferred();
        $this->watcher ??= Loop::onReadable($this->client->stream(), fn () => $this->take());
        // The stream wakes for answers arriving after a tryReceive() that
        // found none: look once this tick (the answer may be there already).
        if (!$this->takeScheduled) {
            $this->takeScheduled = true;
            Loop::defer(fn () => $this->take());
        }
        return $deferred->promise();
    }

    private function take(): void
    {
        $this->takeScheduled = false;
        for (;;) {
            try {
                $answer = $this->client->tryReceive();
            } catch (Shmlink\RemoteException $e) {
                $this->settle($e->callId, $e);
                continue;
            } catch (Shmlink\Exception $e) {
                foreach (array_keys($this->pending) as $id) {
                    $this->settle($id, $e);
                }
                break;
            }
            if ($answer === null) {
                break;
            }
            $this->settle($answer[0], $answer[1]);
        }
        // Watched only while calls are in flight: the loop ends when all are answered.
        if ($this->pending === [] && $this->watcher !== null) {
            Loop::cancel($this->watcher);
            $this->watcher = null;
        }
    }

    private function settle(int $id, string|Throwable $result): void
    {
        $deferred = $this->pending[$id] ?? null;
        unset($this->pending[$id]);
        if ($deferred !== null) {
            $result instanceof Throwable ? $deferred->fail($result) : $deferred->resolve($result);
        }
    }
}

$echo = EchoServer::start(['--reply-ratio', '1']);
echo 'driver: ', get_class(Loop::get()), "\n";
foreach (['shm', 'unix', 'tcp'] as $t) {
    $client = new Shmlink\Client($echo->addresses[$t]);
    $amp = new AmpClient($client);
    $promises = [];
    for ($i = 0; $i < 100; $i++) {
        $promises[$i] = $amp->call("call $i");
    }
    // Coroutines: each awaits one answer, then sends the next call.
    $chains = [];
    for ($i = 0; $i < 10; $i++) {
        $chains[$i] = Amp\call(function () use ($amp, $i) {
            $a = yield $amp->call("chain $i");
            $b = yield $amp->call("$a, then");
            return $b;
        });
    }
    [$answers, $chained] = Promise\wait(Promise\all([Promise\all($promises), Promise\all($chains)]));
    // wait() stops the loop once its promise resolves, maybe with a take()
    // still deferred: run the loop to its end (nothing left watched).
    Loop::run();
    $right = 0;
    foreach ($answers as $i => $a) {
        $right += $a === "call $i";
    }
    $chainsRight = 0;
    foreach ($chained as $i => $a) {
        $chainsRight += $a === "chain $i, then";
    }
    echo "$t: answers ", count($answers), ", right: $right; chains right: $chainsRight\n";
    echo "  blocking call afterwards: ", $client->call('blocking'), "\n";
}
// Amp keeps its loop driver in a static property, and the driver and its
// callbacks reference each other: a release build of PHP collects no cycles
// at exit, so they would count as leaks in the memcheck run. Let go of them.
unset($amp, $client, $promises, $chains);
Closure::bind(fn () => Loop::$driver = null, null, Loop::class)();
gc_collect_cycles();
?>
--EXPECTF--
driver: Amp\Loop\%sDriver
shm: answers 100, right: 100; chains right: 10
  blocking call afterwards: blocking
unix: answers 100, right: 100; chains right: 10
  blocking call afterwards: blocking
tcp: answers 100, right: 100; chains right: 10
  blocking call afterwards: blocking
