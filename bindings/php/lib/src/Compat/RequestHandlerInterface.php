<?php
// The PSR-15 request handler interface (www.php-fig.org/psr/psr-15), for
// systems without the psr/http-server-handler package. autoload.php loads
// it only when no other definition exists.

declare(strict_types=1);

namespace Psr\Http\Server;

use Psr\Http\Message\ResponseInterface;
use Psr\Http\Message\ServerRequestInterface;

interface RequestHandlerInterface
{
    public function handle(ServerRequestInterface $request): ResponseInterface;
}
