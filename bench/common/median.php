<?php
// The median of the benchmarks' rounds (bench/php, bench/http).

declare(strict_types=1);

/** @param list<float|int> $xs non-empty */
function median(array $xs): float
{
    sort($xs);
    $n = count($xs);
    return (float)($n % 2 ? $xs[intdiv($n, 2)] : ($xs[$n / 2 - 1] + $xs[$n / 2]) / 2);
}
