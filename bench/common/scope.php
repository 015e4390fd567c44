<?php
/* Runs the PHP script that calls it in a scope of its own (crates/scope;
 * ci/lib/scope.sh is the same for shell scripts): when it ends, on any way
 * out (an exception, Ctrl-C, SIGTERM, its own SIGKILL), every process it
 * started is stopped, and its temporary files (TMPDIR, and so
 * sys_get_temp_dir(), is the scope's directory) are removed.
 *
 *   require __DIR__ . '/../common/scope.php';
 *   shmlink_scope($shmlink);   // first thing, once the CLI's path is known
 *
 * Unless the script already runs as a scope's command, this replaces the
 * process with `shmlink scope -- PHP ARGS...`, the same PHP command line
 * (ini options included, read from /proc/self/cmdline). */

declare(strict_types=1);

function shmlink_scope(string $shmlink): void
{
    if (getenv('SHMLINK_SCOPE_PARENT') === (string)posix_getppid()) {
        return;
    }
    $cmdline = @file_get_contents('/proc/self/cmdline');
    $argv = $cmdline === false ? [] : explode("\0", rtrim($cmdline, "\0"));
    if ($argv === [] || !is_executable($shmlink)) {
        fwrite(STDERR, "cannot run in a scope: " . ($argv === [] ? 'no /proc/self/cmdline' : "$shmlink is missing") . "\n");
        exit(1);
    }
    $argv[0] = PHP_BINARY;
    pcntl_exec($shmlink, ['scope', '--', ...$argv]);
    fwrite(STDERR, "cannot run in a scope: pcntl_exec($shmlink) failed\n");
    exit(1);
}
