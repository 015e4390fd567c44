<?php
// One request's copy of a booted Laravel application.

declare(strict_types=1);

namespace Shmlink\Laravel;

use Illuminate\Container\Container;
use Illuminate\Contracts\Http\Kernel as HttpKernel;
use Illuminate\Foundation\Application;
use Illuminate\Support\Facades\Facade;

/**
 * The approach Laravel Octane takes: the application boots once; each
 * request runs on a clone of its container, in which what belongs to one
 * request or one user is made afresh (auth, session, cookies, request, a
 * copy of the configuration), and through which the router, the HTTP
 * kernel, the URL generator and the facades resolve. Services the
 * application made singletons stay shared, as under Octane: state such a
 * service keeps is the application's to reset.
 */
final class Sandbox
{
    /** Instances forgotten in each request's container: made afresh when asked for. */
    private const PER_REQUEST = [
        'auth', 'auth.driver', 'auth.password', 'session', 'session.store', 'cookie',
        'request', 'redirect', 'url', 'translator', 'validator',
    ];

    public static function of(Application $app): Application
    {
        $sandbox = clone $app;
        self::enter($sandbox);
        if ($app->resolved('config')) {
            $sandbox->instance('config', clone $app->make('config'));
        }
        foreach (self::PER_REQUEST as $abstract) {
            $sandbox->forgetInstance($abstract);
        }
        $kernel = $sandbox->make(HttpKernel::class);
        if (method_exists($kernel, 'setApplication')) {
            $kernel->setApplication($sandbox);
        }
        if ($sandbox->resolved('router')) {
            $sandbox->make('router')->setContainer($sandbox);
        }
        if ($sandbox->resolved('view')) {
            $sandbox->make('view')->setContainer($sandbox);
            $sandbox->make('view')->share('app', $sandbox);
        }
        return $sandbox;
    }

    /** Makes $app the one the container, the facades and helpers see. */
    public static function enter(Application $app): void
    {
        Container::setInstance($app);
        $app->instance('app', $app);
        $app->instance(Container::class, $app);
        Facade::clearResolvedInstances();
        Facade::setFacadeApplication($app);
    }
}
