/* shmlink PHP extension: Shmlink\Server (construction, addresses, stop);
 * serve() is in serve.c. */

#include "server.h"

#include "server_options.h"

static zend_object_handlers server_handlers;

static zend_object *server_create(zend_class_entry *ce) {
  php_shmlink_server *s = zend_object_alloc(sizeof(php_shmlink_server), ce);
  zend_object_std_init(&s->std, ce);
  object_properties_init(&s->std, ce);
  s->std.handlers = &server_handlers;
  return &s->std;
}

static void server_free(zend_object *obj) {
  php_shmlink_server *s = php_shmlink_server_of(obj);
  /* serve() always waits for the library's server before it returns, also
   * when left by an exception or a fatal error, so nothing runs any more. */
  if (s->server != NULL) {
    shmlink_server_free(s->server);
    s->server = NULL;
    php_shmlink_threads_server_freed();
  }
  zend_object_std_dtor(obj);
}

void php_shmlink_server_minit(zend_class_entry *ce) {
  ce->create_object = server_create;
  memcpy(&server_handlers, zend_get_std_object_handlers(), sizeof server_handlers);
  server_handlers.offset = XtOffsetOf(php_shmlink_server, std);
  server_handlers.free_obj = server_free;
  server_handlers.clone_obj = NULL;
}

static void bind_failed(shmlink_status status) {
  const char *detail = shmlink_last_error();
  switch (status) {
    case SHMLINK_E_INVALID_ADDRESS:
      zend_argument_value_error(1, "is not valid: %s", detail);
      break;
    case SHMLINK_E_INVALID_ARGUMENT:
      zend_argument_value_error(2, "is not valid: %s", detail);
      break;
    default:
      php_shmlink_throw(status);
  }
}

ZEND_METHOD(Shmlink_Server, __construct) {
  HashTable *list = NULL;
  zend_string *one = NULL;
  HashTable *options = NULL;
  ZEND_PARSE_PARAMETERS_START(1, 2)
  Z_PARAM_ARRAY_HT_OR_STR(list, one)
  Z_PARAM_OPTIONAL
  Z_PARAM_ARRAY_HT(options)
  ZEND_PARSE_PARAMETERS_END();

  php_shmlink_server *s = php_shmlink_server_of(Z_OBJ_P(ZEND_THIS));
  if (s->server != NULL) {
    zend_throw_error(NULL, "Shmlink\\Server::__construct() cannot be called twice");
    RETURN_THROWS();
  }
  php_shmlink_server_args args = {0};
  if (php_shmlink_server_addresses(1, list, one, &args) &&
      php_shmlink_server_options(2, options, &args)) {
    shmlink_status status =
        shmlink_server_bind(args.addresses, args.address_count, &args.options, &s->server);
    if (status == SHMLINK_OK) {
      php_shmlink_threads_server_bound();
    } else {
      bind_failed(status);
    }
  }
  php_shmlink_server_args_free(&args);
}

/* The bound server, or NULL after throwing. */
shmlink_server *php_shmlink_server_bound(php_shmlink_server *s) {
  if (s->server == NULL) {
    zend_throw_error(NULL, "Shmlink\\Server object is not constructed");
  }
  return s->server;
}

ZEND_METHOD(Shmlink_Server, addresses) {
  ZEND_PARSE_PARAMETERS_NONE();
  shmlink_server *server = php_shmlink_server_bound(php_shmlink_server_of(Z_OBJ_P(ZEND_THIS)));
  if (server == NULL) {
    RETURN_THROWS();
  }
  size_t n = shmlink_server_address_count(server);
  array_init_size(return_value, (uint32_t)n);
  for (size_t i = 0; i < n; i++) {
    add_next_index_string(return_value, shmlink_server_address(server, i));
  }
}

ZEND_METHOD(Shmlink_Server, stop) {
  ZEND_PARSE_PARAMETERS_NONE();
  shmlink_server *server = php_shmlink_server_bound(php_shmlink_server_of(Z_OBJ_P(ZEND_THIS)));
  if (server == NULL) {
    RETURN_THROWS();
  }
  shmlink_server_stop(server);
}
