<?php
/* Where bench/php/bench.php is, on stderr: on a terminal one bar redrawn in
 * place ([#####.....] 12/36 shm, 2048 B, one connection), otherwise one line
 * a point, so logs stay readable. */

declare(strict_types=1);

final class Progress
{
    private const WIDTH = 24;
    private int $done = 0;
    private bool $tty;
    private float $start;

    public function __construct(public int $total = 0)
    {
        $this->tty = stream_isatty(STDERR);
        $this->start = microtime(true);
    }

    /** The next step starts. */
    public function next(string $what): void
    {
        $this->done++;
        $filled = $this->total > 0 ? intdiv(($this->done - 1) * self::WIDTH, $this->total) : 0;
        $line = sprintf('[%s%s] %*d/%d %s (%.0f s)', str_repeat('#', $filled), str_repeat('.', self::WIDTH - $filled),
            strlen((string)$this->total), $this->done, $this->total, $what, microtime(true) - $this->start);
        fwrite(STDERR, $this->tty ? "\r\033[K$line" : "$line\n");
    }

    /** A line that stays (a failure, a note), above the bar. */
    public function note(string $text): void
    {
        fwrite(STDERR, $this->tty ? "\r\033[K$text\n" : "$text\n");
    }

    /** All steps done: the bar is cleared. */
    public function done(): void
    {
        if ($this->tty) {
            fwrite(STDERR, "\r\033[K");
        }
        fwrite(STDERR, sprintf("%d points in %.0f s\n", $this->done, microtime(true) - $this->start));
    }
}
