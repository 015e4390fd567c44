<?php
/* What the PHP readers of published results share (bench/headline.php,
 * bench/arena-checks.php): loading a JSON file written by a benchmark, and
 * printing a figure with as many digits as it deserves. */

declare(strict_types=1);

/** The decoded JSON of $file; exits 1 naming $who when missing or not JSON. */
function load_results(string $file, string $who): array
{
    $d = json_decode((string)@file_get_contents($file), true);
    if (!is_array($d)) {
        fwrite(STDERR, "$who: $file is missing or not JSON\n");
        exit(1);
    }
    return $d;
}

/** 1,234 / 12.3 / 1.23. */
function num(float $v): string
{
    return $v >= 100 ? number_format($v, 0, '.', ',') : ($v >= 10 ? sprintf('%.1f', $v) : sprintf('%.2f', $v));
}

/**
 * The first $n arguments of the script named $who, loaded as results; prints
 * "usage: php bench/$who.php $usage" and exits 2 when fewer are given.
 */
function load_args(array $argv, string $who, string $usage, int $n): array
{
    if (count($argv) <= $n) {
        fwrite(STDERR, "usage: php bench/$who.php $usage\n");
        exit(2);
    }
    return array_map(fn (string $f): array => load_results($f, $who), array_slice($argv, 1, $n));
}
