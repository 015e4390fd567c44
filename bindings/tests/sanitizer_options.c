/* Default sanitizer options compiled into every test program of the
 * SHMLINK_SANITIZE=ON build, so that they apply however the programs are run
 * (ctest, by hand, or spawned by another test). ASAN_OPTIONS and
 * UBSAN_OPTIONS in the environment still override them.
 *
 * detect_leaks=1: LeakSanitizer works in this environment (it needs ptrace
 * on its own threads, which is allowed here), so leaks of the tests or of the
 * library's allocations (made through the intercepted malloc) fail a run. */
const char *__asan_default_options(void);
const char *__ubsan_default_options(void);

const char *__asan_default_options(void) {
  return "detect_leaks=1:strict_string_checks=1:detect_stack_use_after_return=1:"
         "check_initialization_order=1";
}

const char *__ubsan_default_options(void) { return "print_stacktrace=1:halt_on_error=1"; }
