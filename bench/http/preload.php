<?php
/* opcache.preload of the "nginx + PHP-FPM + preload" rows: compiles every
 * PHP file of the app's directory (app (b): its ~300 classes) into shared
 * memory once, at PHP-FPM's start. */

declare(strict_types=1);

$dir = dirname((string)getenv('APP_FILE'));
$files = new RecursiveIteratorIterator(new RecursiveDirectoryIterator($dir, FilesystemIterator::SKIP_DOTS));
foreach ($files as $f) {
    if ($f->getExtension() === 'php' && $f->getFilename() !== 'generate.php') {
        opcache_compile_file($f->getPathname());
    }
}
