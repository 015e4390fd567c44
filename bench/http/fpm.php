<?php
/* The PHP-FPM front of the HTTP benchmark's apps: nginx passes the app's
 * file in APP_FILE; every request bootstraps it (as PHP-FPM runs any app). */

declare(strict_types=1);

[$status, $type, $body] = (require $_SERVER['APP_FILE'])();
http_response_code($status);
header("Content-Type: $type");
echo $body;
