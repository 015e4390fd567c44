<?php
/*
 * Checks that the loaded shmlink extension declares exactly what
 * shmlink.stub.php declares: classes (parent, final, flags), methods and
 * functions, parameter names, types, by-reference, defaults, and return
 * types. It loads the stub itself under another namespace and compares both
 * through Reflection, so a stale shmlink_arginfo.h or a module built from
 * an older one is caught.
 *
 *   php -d extension=modules/shmlink.so tools/check-arginfo.php [STUB]
 *
 * Prints one line per mismatch and exits 1, or a summary and exits 0.
 */

declare(strict_types=1);

const EXT_NS = 'Shmlink';
const STUB_NS = 'ShmlinkStubCheck';

$stub = $argv[1] ?? dirname(__DIR__) . '/shmlink.stub.php';
if (!extension_loaded('shmlink')) {
    fwrite(STDERR, "check-arginfo: the shmlink extension is not loaded\n");
    exit(2);
}
$code = file_get_contents($stub);
if ($code === false) {
    fwrite(STDERR, "check-arginfo: cannot read $stub\n");
    exit(2);
}
$code = preg_replace('/^namespace\s+' . EXT_NS . '\b/m', 'namespace ' . STUB_NS, $code, -1, $n);
if ($n === 0) {
    fwrite(STDERR, "check-arginfo: no `namespace " . EXT_NS . "` in $stub\n");
    exit(2);
}
eval('?>' . $code);

/** A name of the stub's namespace as the extension's. */
function ext_name(string $name): string
{
    return preg_replace('/(^|(?<=[\\\\|?(&]))' . STUB_NS . '\\\\/', EXT_NS . '\\', ltrim($name, '\\'));
}

function type_of(?ReflectionType $t): string
{
    return $t === null ? '(none)' : ext_name((string)$t);
}

function default_of(ReflectionParameter $p): string
{
    if (!$p->isOptional()) {
        return '(required)';
    }
    if (!$p->isDefaultValueAvailable()) {
        return '(no default)';
    }
    return $p->isDefaultValueConstant() ? $p->getDefaultValueConstantName() : var_export($p->getDefaultValue(), true);
}

/** Everything checked about a function or method, as lines. */
function describe_function(ReflectionFunctionAbstract $f): array
{
    $out = [];
    if ($f instanceof ReflectionMethod) {
        $out[] = 'modifiers ' . implode(' ', Reflection::getModifierNames($f->getModifiers()));
    }
    $out[] = 'returns ' . type_of($f->getReturnType()) . ($f->returnsReference() ? ' by reference' : '');
    $out[] = 'required parameters ' . $f->getNumberOfRequiredParameters();
    foreach ($f->getParameters() as $p) {
        $out[] = sprintf('parameter #%d $%s: %s%s%s = %s', $p->getPosition() + 1, $p->getName(),
            type_of($p->getType()), $p->isPassedByReference() ? ' by reference' : '',
            $p->isVariadic() ? ' variadic' : '', default_of($p));
    }
    return $out;
}

function describe_class(ReflectionClass $c): array
{
    $out = [];
    $parent = $c->getParentClass();
    $out[] = 'extends ' . ($parent === false ? '(nothing)' : ext_name($parent->getName()));
    $out[] = 'implements ' . implode(', ', array_map('ext_name', $c->getInterfaceNames()));
    $out[] = 'final ' . var_export($c->isFinal(), true) . ', abstract ' . var_export($c->isAbstract(), true);
    $own = array_filter($c->getMethods(), fn ($m) => $m->getDeclaringClass()->getName() === $c->getName());
    $names = array_map(fn ($m) => $m->getName(), $own);
    sort($names);
    $out[] = 'methods ' . implode(', ', $names);
    foreach ($names as $name) {
        foreach (describe_function($c->getMethod($name)) as $line) {
            $out[] = "$name(): $line";
        }
    }
    $consts = array_keys($c->getReflectionConstants());
    $out[] = 'constants ' . implode(', ', $consts);
    return $out;
}

/** Declared classes/functions of a namespace, keyed by name relative to it. */
function declared(string $ns, array $names): array
{
    $out = [];
    foreach ($names as $n) {
        if (str_starts_with(strtolower($n), strtolower($ns) . '\\')) {
            $out[substr($n, strlen($ns) + 1)] = $n;
        }
    }
    ksort($out);
    return $out;
}

$ext = new ReflectionExtension('shmlink');
$problems = [];
$compare = function (string $what, array $want, array $have) use (&$problems) {
    foreach (array_map(null, $want, $have) as [$w, $h]) {
        if ($w !== $h) {
            $problems[] = "$what: stub says \"" . ($w ?? '(nothing)') . '", extension has "' . ($h ?? '(nothing)') . '"';
        }
    }
};

$stubClasses = declared(STUB_NS, array_merge(get_declared_classes(), get_declared_interfaces()));
$extClasses = declared(EXT_NS, $ext->getClassNames());
$compare('classes', array_keys($stubClasses), array_keys($extClasses));
$methods = 0;
foreach (array_intersect_key($stubClasses, $extClasses) as $short => $stubName) {
    $want = describe_class(new ReflectionClass($stubName));
    $have = describe_class(new ReflectionClass($extClasses[$short]));
    $compare(EXT_NS . "\\$short", $want, $have);
    $rc = new ReflectionClass($stubName);
    $methods += count(array_filter($rc->getMethods(), fn ($m) => $m->getDeclaringClass()->getName() === $stubName));
}

$stubFunctions = declared(STUB_NS, get_defined_functions()['user']);
$extFunctions = declared(EXT_NS, array_keys($ext->getFunctions()));
$compare('functions', array_keys($stubFunctions), array_keys($extFunctions));
foreach (array_intersect_key($stubFunctions, $extFunctions) as $short => $stubName) {
    $compare(EXT_NS . "\\$short()", describe_function(new ReflectionFunction($stubName)),
        describe_function(new ReflectionFunction($extFunctions[$short])));
}

if ($problems !== []) {
    fwrite(STDERR, "check-arginfo: the extension and $stub differ:\n  " . implode("\n  ", $problems) . "\n");
    exit(1);
}
printf("check-arginfo: %d classes, %d methods and %d functions agree with %s\n",
    count($extClasses), $methods, count($extFunctions), basename($stub));
