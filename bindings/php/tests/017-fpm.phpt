--TEST--
Under php-fpm: the module loads with an empty environment, persistent sessions outlive requests, a recycled worker exits cleanly
--EXTENSIONS--
shmlink
--SKIPIF--
<?php
if (!is_executable('/usr/sbin/php-fpm' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION)) {
    die('skip php-fpm not installed');
}
?>
--FILE--
<?php
require __DIR__ . '/_server.inc';

/** One FastCGI request for $script over the socket $sock; returns the body. */
function fcgi_get(string $sock, string $script): string
{
    $record = function (int $type, string $body): string {
        $pad = (8 - strlen($body) % 8) % 8;
        return pack('CCnnCC', 1, $type, 1, strlen($body), $pad, 0) . $body . str_repeat("\0", $pad);
    };
    $params = '';
    foreach (['SCRIPT_FILENAME' => $script, 'REQUEST_METHOD' => 'GET', 'SCRIPT_NAME' => '/page.php'] as $k => $v) {
        $params .= chr(strlen($k)) . chr(strlen($v)) . $k . $v;
    }
    $s = stream_socket_client("unix://$sock", $errno, $error, SHMLINK_TEST_DEADLINE);
    stream_set_timeout($s, (int)SHMLINK_TEST_DEADLINE);
    fwrite($s, $record(1, pack('nCx5', 1, 0)) . $record(4, $params) . $record(4, '') . $record(5, ''));
    $out = '';
    while (strlen($h = (string)fread($s, 8)) === 8) {
        $r = unpack('Cversion/Ctype/nid/nlen/Cpad/Creserved', $h);
        $body = $r['len'] + $r['pad'] > 0 ? stream_get_contents($s, $r['len'] + $r['pad']) : '';
        if ($r['type'] === 6) {
            $out .= substr($body, 0, $r['len']);
        } elseif ($r['type'] === 3) {
            break;
        }
    }
    fclose($s);
    return preg_replace('/^.*?\r\n\r\n/s', '', $out);
}

$dir = shmlink_test_dir();
$echo = EchoServer::start(['--reply-ratio', '1'], $dir);
$module = realpath(dirname(__DIR__) . '/modules/shmlink.so');
$user = trim((string)shell_exec('id -un'));
$group = trim((string)shell_exec('id -gn'));
file_put_contents("$dir/fpm.conf", <<<CONF
[global]
error_log = $dir/fpm.log
daemonize = no
[www]
user = $user
group = $group
listen = $dir/fpm.sock
pm = static
pm.max_children = 1
pm.max_requests = 3

CONF);
file_put_contents("$dir/page.php", <<<'PAGE'
<?php
$c = new Shmlink\Client(getenv('ECHO_ADDRESS'), ['persistent' => true]);
$s = Shmlink\stats();
echo getmypid(), ' ', $c->call('response'), " connects={$s['connects']} reuses={$s['persistent_reuses']}",
    " reconnects={$s['reconnects']} sessions={$s['persistent_sessions']}\n";
PAGE);
file_put_contents("$dir/fpm.conf", "env[ECHO_ADDRESS] = {$echo->addresses['unix']}\n", FILE_APPEND);

// An empty environment: no LD_LIBRARY_PATH, nothing but the module file.
$fpm = proc_open(['/usr/sbin/php-fpm' . PHP_MAJOR_VERSION . '.' . PHP_MINOR_VERSION, '-n', '-R', '-y', "$dir/fpm.conf",
                  '-d', "extension=$module"],
                 [0 => ['file', '/dev/null', 'r'], 1 => ['file', "$dir/fpm.out", 'w'], 2 => ['file', "$dir/fpm.out", 'a']],
                 $pipes, $dir, []);
shmlink_wait_until(function () use ($fpm, $dir) {
    clearstatcache();
    if (!proc_get_status($fpm)['running']) {
        throw new RuntimeException('php-fpm exited: ' . file_get_contents("$dir/fpm.out"));
    }
    return file_exists("$dir/fpm.sock") ? true : null;
}, 'php-fpm');

$workers = [];
for ($i = 1; $i <= 5; $i++) {
    if ($i === 3) {
        // The service restarts between two requests of the same worker.
        $echo->stop();
        $echo = EchoServer::start(['--reply-ratio', '1'], $dir);
    }
    [$pid, $rest] = explode(' ', fcgi_get("$dir/fpm.sock", "$dir/page.php"), 2);
    $workers[$pid] ??= 'worker ' . (count($workers) + 1);
    echo "request $i: {$workers[$pid]}: $rest";
}
proc_terminate($fpm, SIGTERM);
shmlink_wait_until(fn () => proc_get_status($fpm)['running'] ? null : true, 'php-fpm to exit');
proc_close($fpm);
echo "recycled worker exited cleanly: ",
    preg_match('/child \d+ exited with code 0 after/', (string)file_get_contents("$dir/fpm.log")), "\n";
?>
--EXPECT--
request 1: worker 1: response connects=1 reuses=0 reconnects=0 sessions=1
request 2: worker 1: response connects=1 reuses=1 reconnects=0 sessions=1
request 3: worker 1: response connects=2 reuses=1 reconnects=1 sessions=1
request 4: worker 2: response connects=1 reuses=0 reconnects=0 sessions=1
request 5: worker 2: response connects=1 reuses=1 reconnects=0 sessions=1
recycled worker exited cleanly: 1
