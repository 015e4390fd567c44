<?php
// The library's classes without Composer: require this file, and the PSR
// interfaces from wherever they are installed (Debian: /usr/share/php).
// With Composer, require shmlink/shmlink instead: its autoload does this.

declare(strict_types=1);

spl_autoload_register(static function (string $class): void {
    $prefix = 'Shmlink\\';
    if (!str_starts_with($class, $prefix)) {
        return;
    }
    $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
    if (is_file($file)) {
        require $file;
    }
});

// PSR-15's handler interface, for systems that package PSR-7 and PSR-17
// but not PSR-15 (Debian 12): declared here only when no package gives it.
if (!interface_exists(\Psr\Http\Server\RequestHandlerInterface::class)) {
    require __DIR__ . '/src/Compat/RequestHandlerInterface.php';
}
