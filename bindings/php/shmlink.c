/* shmlink PHP extension: module entry, class registration, phpinfo() and
 * Shmlink\stats(). */

#include "http.h"
#include "php_shmlink.h"
#include "shmlink_arginfo.h"

zend_class_entry *php_shmlink_client_ce;
zend_class_entry *php_shmlink_server_ce;
zend_class_entry *php_shmlink_worker_ce;
zend_class_entry *php_shmlink_exception_ce;
zend_class_entry *php_shmlink_connect_exception_ce;
zend_class_entry *php_shmlink_timeout_exception_ce;
zend_class_entry *php_shmlink_closed_exception_ce;
zend_class_entry *php_shmlink_remote_exception_ce;
zend_class_entry *php_shmlink_protocol_exception_ce;

php_shmlink_counters php_shmlink_stats;

static uint64_t counter(uint64_t *field) { return __atomic_load_n(field, __ATOMIC_RELAXED); }

static zend_long as_long(uint64_t v) { return v > ZEND_LONG_MAX ? ZEND_LONG_MAX : (zend_long)v; }

/* Every counter, by name, in the order stats() and phpinfo() show them. */
static void each_counter(void (*fn)(const char *name, uint64_t value, void *ctx), void *ctx) {
  fn("connects", counter(&php_shmlink_stats.connects), ctx);
  fn("persistent_reuses", counter(&php_shmlink_stats.persistent_reuses), ctx);
  fn("reconnects", counter(&php_shmlink_stats.reconnects), ctx);
  fn("calls", counter(&php_shmlink_stats.calls), ctx);
  fn("errors", counter(&php_shmlink_stats.errors), ctx);
  fn("persistent_sessions", php_shmlink_persistent_count(), ctx);
}

static void add_counter(const char *name, uint64_t value, void *ctx) {
  add_assoc_long((zval *)ctx, name, as_long(value));
}

ZEND_FUNCTION(Shmlink_stats) {
  ZEND_PARSE_PARAMETERS_NONE();
  array_init_size(return_value, 6);
  each_counter(add_counter, return_value);
}

static void info_counter(const char *name, uint64_t value, void *ctx) {
  (void)ctx;
  char buf[32];
  snprintf(buf, sizeof buf, "%" PRIu64, value);
  php_info_print_table_row(2, name, buf);
}

static PHP_MINFO_FUNCTION(shmlink) {
  php_info_print_table_start();
  php_info_print_table_row(2, "shmlink support", "enabled");
  php_info_print_table_row(2, "extension version", PHP_SHMLINK_VERSION);
  php_info_print_table_row(2, "library version", shmlink_version());
  php_info_print_table_end();
  php_info_print_table_start();
  php_info_print_table_header(2, "counter (this process)", "value");
  each_counter(info_counter, NULL);
  php_info_print_table_end();
}

static PHP_MINIT_FUNCTION(shmlink) {
  php_shmlink_exception_ce = register_class_Shmlink_Exception(spl_ce_RuntimeException);
  zend_class_entry *base = php_shmlink_exception_ce;
  php_shmlink_connect_exception_ce = register_class_Shmlink_ConnectException(base);
  php_shmlink_timeout_exception_ce = register_class_Shmlink_TimeoutException(base);
  php_shmlink_closed_exception_ce = register_class_Shmlink_ClosedException(base);
  php_shmlink_remote_exception_ce = register_class_Shmlink_RemoteException(base);
  php_shmlink_protocol_exception_ce = register_class_Shmlink_ProtocolException(base);

  php_shmlink_client_ce = register_class_Shmlink_Client();
  php_shmlink_client_minit(php_shmlink_client_ce);
  php_shmlink_server_ce = register_class_Shmlink_Server();
  php_shmlink_server_minit(php_shmlink_server_ce);
  php_shmlink_worker_ce = register_class_Shmlink_Worker();
  php_shmlink_worker_minit(php_shmlink_worker_ce);
  php_shmlink_http_request_ce = register_class_Shmlink_HttpRequest();
  php_shmlink_http_response_ce = register_class_Shmlink_HttpResponse();

  php_shmlink_persistent_startup(module_number);
  php_shmlink_stream_minit();
  return SUCCESS;
}

static PHP_MSHUTDOWN_FUNCTION(shmlink) {
  php_shmlink_threads_shutdown();
  return SUCCESS;
}

static PHP_RSHUTDOWN_FUNCTION(shmlink) {
  php_shmlink_http_globals_shutdown();
  php_shmlink_http_headers_shutdown();
  return SUCCESS;
}

static const zend_module_dep shmlink_deps[] = {ZEND_MOD_REQUIRED("spl") ZEND_MOD_END};

zend_module_entry shmlink_module_entry = {
    STANDARD_MODULE_HEADER_EX,
    NULL,
    shmlink_deps,
    "shmlink",
    ext_functions,
    PHP_MINIT(shmlink),
    PHP_MSHUTDOWN(shmlink),
    NULL,
    PHP_RSHUTDOWN(shmlink),
    PHP_MINFO(shmlink),
    PHP_SHMLINK_VERSION,
    STANDARD_MODULE_PROPERTIES,
};

#ifdef COMPILE_DL_SHMLINK
ZEND_GET_MODULE(shmlink)
#endif
