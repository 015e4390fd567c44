/* shmlink PHP extension: Shmlink\Client. */

#include <fcntl.h>
#include <unistd.h>

#include "php_shmlink.h"

/* Responses are copied into PHP strings; a library buffer grown past this by
 * a large response is released, so an idle process does not keep it. */
#define KEEP_BUFFER_BYTES (1u << 20)

typedef struct {
  php_shmlink_session *session; /* NULL once closed */
  zend_string *address;         /* NULL until constructed */
  zend_resource *stream;        /* stream() made it (a reference of ours), or NULL */
  zend_object std;
} php_shmlink_client;

static zend_object_handlers client_handlers;

static inline php_shmlink_client *client_of(zend_object *obj) {
  return (php_shmlink_client *)((char *)obj - XtOffsetOf(php_shmlink_client, std));
}

#define THIS_CLIENT() client_of(Z_OBJ_P(ZEND_THIS))

static zend_object *client_create(zend_class_entry *ce) {
  php_shmlink_client *c = zend_object_alloc(sizeof(php_shmlink_client), ce);
  zend_object_std_init(&c->std, ce);
  object_properties_init(&c->std, ce);
  c->std.handlers = &client_handlers;
  return &c->std;
}

static void stream_drop(php_shmlink_client *c);

static void client_free(zend_object *obj) {
  php_shmlink_client *c = client_of(obj);
  stream_drop(c);
  if (c->session != NULL) {
    php_shmlink_session_release(c->session);
    c->session = NULL;
  }
  if (c->address != NULL) {
    zend_string_release(c->address);
  }
  zend_object_std_dtor(obj);
}

void php_shmlink_client_minit(zend_class_entry *ce) {
  ce->create_object = client_create;
  memcpy(&client_handlers, zend_get_std_object_handlers(), sizeof client_handlers);
  client_handlers.offset = XtOffsetOf(php_shmlink_client, std);
  client_handlers.free_obj = client_free;
  client_handlers.clone_obj = NULL;
}

/* The open session, or NULL after throwing ClosedException. */
static php_shmlink_session *open_session(php_shmlink_client *c) {
  if (c->session != NULL && !c->session->closed && php_shmlink_session_owned(c->session)) {
    return c->session;
  }
  PHP_SHMLINK_COUNT(errors);
  if (c->session != NULL && !php_shmlink_session_owned(c->session)) {
    php_shmlink_throw_closed(
        "client of %s belongs to the process that opened it, not to this forked child: open "
        "a new Shmlink\\Client here",
        ZSTR_VAL(c->address));
  } else if (c->session != NULL) {
    php_shmlink_throw_closed(
        "client of %s was closed with Shmlink\\Client::close() on another object sharing its "
        "persistent session",
        ZSTR_VAL(c->address));
  } else if (c->address == NULL) {
    zend_throw_error(NULL, "Shmlink\\Client object is not constructed");
  } else {
    php_shmlink_throw_closed("client of %s was closed with Shmlink\\Client::close()",
                             ZSTR_VAL(c->address));
  }
  return NULL;
}

static void call_failed(shmlink_status status) {
  PHP_SHMLINK_COUNT(errors);
  php_shmlink_throw(status);
}

/* The response in the session's buffer, as a PHP string. */
static void response_string(php_shmlink_session *s, zval *return_value) {
  PHP_SHMLINK_COUNT(calls);
  if (s->buffer.len == 0) {
    RETVAL_EMPTY_STRING();
  } else {
    RETVAL_STRINGL((const char *)s->buffer.data, s->buffer.len);
  }
  if (s->buffer.capacity > KEEP_BUFFER_BYTES) {
    shmlink_buffer_free(&s->buffer);
  }
}

static void connect_failed(shmlink_status status) {
  const char *detail = shmlink_last_error();
  switch (status) {
    case SHMLINK_E_INVALID_ADDRESS: /* e.g. a socket path longer than the kernel takes */
      zend_argument_value_error(1, "is not a valid address: %s", detail);
      break;
    case SHMLINK_E_INVALID_ARGUMENT: /* an option the library's range check refused */
      zend_argument_value_error(2, "is not valid: %s", detail);
      break;
    default:
      php_shmlink_throw(status);
  }
}

ZEND_METHOD(Shmlink_Client, __construct) {
  zend_string *address;
  HashTable *options = NULL;
  ZEND_PARSE_PARAMETERS_START(1, 2)
  Z_PARAM_PATH_STR(address)
  Z_PARAM_OPTIONAL
  Z_PARAM_ARRAY_HT(options)
  ZEND_PARSE_PARAMETERS_END();

  php_shmlink_client *c = THIS_CLIENT();
  if (c->address != NULL) {
    zend_throw_error(NULL, "Shmlink\\Client::__construct() cannot be called twice");
    RETURN_THROWS();
  }
  if (!php_shmlink_address_ok(address)) {
    zend_argument_value_error(
        1, "must be \"shm:PATH\", \"unix:PATH\" or \"tcp:HOST:PORT\", \"%s\" given",
        ZSTR_VAL(address));
    RETURN_THROWS();
  }
  shmlink_client_options o;
  bool persistent = false;
  if (options == NULL) {
    shmlink_client_options_init(&o);
  } else if (!php_shmlink_client_options(2, options, &o, &persistent)) {
    RETURN_THROWS();
  }
  shmlink_status status;
  c->session = php_shmlink_session_open(ZSTR_VAL(address), &o, persistent, &status);
  if (c->session == NULL) {
    connect_failed(status);
    RETURN_THROWS();
  }
  c->address = zend_string_copy(address);
}

ZEND_METHOD(Shmlink_Client, call) {
  zend_string *request;
  double timeout = 0;
  bool timeout_null = true;
  ZEND_PARSE_PARAMETERS_START(1, 2)
  Z_PARAM_STR(request)
  Z_PARAM_OPTIONAL
  Z_PARAM_DOUBLE_OR_NULL(timeout, timeout_null)
  ZEND_PARSE_PARAMETERS_END();

  uint64_t us = 0; /* 0: the client's timeout */
  if (!timeout_null && !php_shmlink_timeout_arg(2, timeout, &us)) {
    RETURN_THROWS();
  }
  php_shmlink_session *s = open_session(THIS_CLIENT());
  if (s == NULL) {
    RETURN_THROWS();
  }
  /* A response the server lent from its arena is copied once, from the
   * arena into the PHP string; any other lands in the session's buffer. */
  shmlink_view *lent = NULL;
  shmlink_status status = shmlink_client_call_or_view(s->client, (const uint8_t *)ZSTR_VAL(request),
                                                      ZSTR_LEN(request), us, &s->buffer, &lent);
  if (status != SHMLINK_OK) {
    call_failed(status);
    RETURN_THROWS();
  }
  response_string(s, return_value);
  if (lent != NULL) {
    shmlink_view_free(lent);
    shmlink_buffer_free(&s->buffer); /* it pointed into the view */
  }
}

ZEND_METHOD(Shmlink_Client, send) {
  zend_string *request;
  ZEND_PARSE_PARAMETERS_START(1, 1)
  Z_PARAM_STR(request)
  ZEND_PARSE_PARAMETERS_END();

  php_shmlink_session *s = open_session(THIS_CLIENT());
  if (s == NULL) {
    RETURN_THROWS();
  }
  uint64_t id = 0;
  shmlink_status status =
      shmlink_client_send(s->client, (const uint8_t *)ZSTR_VAL(request), ZSTR_LEN(request), &id);
  if (status != SHMLINK_OK) {
    call_failed(status);
    RETURN_THROWS();
  }
  RETURN_LONG((zend_long)id);
}

ZEND_METHOD(Shmlink_Client, receive) {
  zval *id_ref = NULL;
  double timeout = 0;
  bool timeout_null = true;
  ZEND_PARSE_PARAMETERS_START(0, 2)
  Z_PARAM_OPTIONAL
  Z_PARAM_ZVAL(id_ref)
  Z_PARAM_DOUBLE_OR_NULL(timeout, timeout_null)
  ZEND_PARSE_PARAMETERS_END();

  uint64_t us = 0;
  if (!timeout_null && !php_shmlink_timeout_arg(2, timeout, &us)) {
    RETURN_THROWS();
  }
  php_shmlink_session *s = open_session(THIS_CLIENT());
  if (s == NULL) {
    RETURN_THROWS();
  }
  uint64_t id = 0;
  shmlink_status status = shmlink_client_recv(s->client, us, &id, &s->buffer);
  /* The id is known for a remote error too: set it before throwing. */
  if (id_ref != NULL && (status == SHMLINK_OK || status == SHMLINK_E_REMOTE)) {
    ZEND_TRY_ASSIGN_REF_LONG(id_ref, (zend_long)id);
  }
  if (status != SHMLINK_OK) {
    PHP_SHMLINK_COUNT(errors);
    php_shmlink_throw_answer(status, id);
    RETURN_THROWS();
  }
  response_string(s, return_value);
}

ZEND_METHOD(Shmlink_Client, notify) {
  zend_string *message;
  ZEND_PARSE_PARAMETERS_START(1, 1)
  Z_PARAM_STR(message)
  ZEND_PARSE_PARAMETERS_END();

  php_shmlink_session *s = open_session(THIS_CLIENT());
  if (s == NULL) {
    RETURN_THROWS();
  }
  shmlink_status status =
      shmlink_client_notify(s->client, (const uint8_t *)ZSTR_VAL(message), ZSTR_LEN(message));
  if (status != SHMLINK_OK) {
    call_failed(status);
    RETURN_THROWS();
  }
}

ZEND_METHOD(Shmlink_Client, isConnected) {
  ZEND_PARSE_PARAMETERS_NONE();
  php_shmlink_session *s = THIS_CLIENT()->session;
  RETURN_BOOL(s != NULL && php_shmlink_session_owned(s) &&
              shmlink_client_is_connected(s->client) == 1);
}

ZEND_METHOD(Shmlink_Client, transport) {
  ZEND_PARSE_PARAMETERS_NONE();
  php_shmlink_session *s = THIS_CLIENT()->session;
  if (s == NULL || !php_shmlink_session_owned(s)) {
    RETURN_NULL();
  }
  switch (shmlink_client_transport(s->client)) {
    case SHMLINK_TRANSPORT_SHM:
      RETURN_STRING("shm");
    case SHMLINK_TRANSPORT_UNIX:
      RETURN_STRING("unix");
    case SHMLINK_TRANSPORT_TCP:
      RETURN_STRING("tcp");
    default:
      RETURN_NULL();
  }
}

ZEND_METHOD(Shmlink_Client, close) {
  ZEND_PARSE_PARAMETERS_NONE();
  php_shmlink_client *c = THIS_CLIENT();
  stream_drop(c);
  if (c->session != NULL) {
    php_shmlink_session_close(c->session);
    c->session = NULL;
  }
}

/* The stream of Client::stream(): a duplicate of the client's readiness
 * descriptor (an epoll set the library owns), for stream_select() and event
 * loops to watch. Never read: its read and write fail. */
typedef struct {
  int fd;
} watch_stream;

static ssize_t watch_write(php_stream *stream, const char *buf, size_t count) {
  (void)stream, (void)buf, (void)count;
  php_error_docref(NULL, E_WARNING,
                   "the stream of Shmlink\\Client::stream() cannot be written to: it is only "
                   "watched for readability");
  return -1;
}

static ssize_t watch_read(php_stream *stream, char *buf, size_t count) {
  (void)stream, (void)buf, (void)count;
  php_error_docref(NULL, E_WARNING,
                   "the stream of Shmlink\\Client::stream() is not read: watch it for "
                   "readability, then take answers with Shmlink\\Client::tryReceive()");
  return -1;
}

static int watch_close(php_stream *stream, int close_handle) {
  watch_stream *w = stream->abstract;
  if (close_handle && w->fd >= 0) {
    close(w->fd);
  }
  efree(w);
  return 0;
}

static int watch_flush(php_stream *stream) {
  (void)stream;
  return 0;
}

/* The descriptor for select() (stream_select, the loops built on it) and
 * for the loops that take a descriptor (ev, event, uv). */
static int watch_cast(php_stream *stream, int castas, void **ret) {
  watch_stream *w = stream->abstract;
  switch (castas) {
    case PHP_STREAM_AS_FD_FOR_SELECT:
    case PHP_STREAM_AS_FD:
    case PHP_STREAM_AS_SOCKETD:
      if (ret != NULL) {
        *(int *)ret = w->fd; /* php_socket_t is an int here */
      }
      return SUCCESS;
    default:
      return FAILURE;
  }
}

static const php_stream_ops watch_ops = {
    .write = watch_write,
    .read = watch_read,
    .close = watch_close,
    .flush = watch_flush,
    .label = "shmlink",
    .cast = watch_cast,
};

/* Closes the stream stream() made (if the user has not) and lets go of it. */
static void stream_drop(php_shmlink_client *c) {
  if (c->stream == NULL) {
    return;
  }
  zend_resource *res = c->stream;
  c->stream = NULL;
  if (res->ptr != NULL) {
    zend_list_close(res);
  }
  zend_list_delete(res);
}

ZEND_METHOD(Shmlink_Client, stream) {
  ZEND_PARSE_PARAMETERS_NONE();
  php_shmlink_client *c = THIS_CLIENT();
  php_shmlink_session *s = open_session(c);
  if (s == NULL) {
    RETURN_THROWS();
  }
  if (c->stream != NULL && c->stream->ptr != NULL) {
    GC_ADDREF(c->stream);
    RETURN_RES(c->stream);
  }
  stream_drop(c); /* closed with fclose(): a new one */
  int fd = -1;
  shmlink_status status = shmlink_client_fd(s->client, &fd);
  if (status != SHMLINK_OK) {
    call_failed(status);
    RETURN_THROWS();
  }
  int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) {
    PHP_SHMLINK_COUNT(errors);
    zend_throw_exception_ex(php_shmlink_exception_ce, 0,
                            "the readiness descriptor of the client of %s cannot be duplicated: %s",
                            ZSTR_VAL(c->address), strerror(errno));
    RETURN_THROWS();
  }
  watch_stream *w = emalloc(sizeof *w);
  w->fd = own;
  php_stream *stream = php_stream_alloc(&watch_ops, w, NULL, "r");
  stream->flags |= PHP_STREAM_FLAG_NO_BUFFER;
  php_stream_to_zval(stream, return_value);
  c->stream = stream->res;
  GC_ADDREF(c->stream);
}

ZEND_METHOD(Shmlink_Client, tryReceive) {
  ZEND_PARSE_PARAMETERS_NONE();
  php_shmlink_session *s = open_session(THIS_CLIENT());
  if (s == NULL) {
    RETURN_THROWS();
  }
  uint64_t id = 0;
  shmlink_status status = shmlink_client_try_receive(s->client, &id, &s->buffer);
  /* Nothing in flight: nothing will arrive either, so a loop draining
   * answers stops on null rather than on an exception. */
  if (status == SHMLINK_E_WOULD_BLOCK || status == SHMLINK_E_NOTHING_IN_FLIGHT) {
    RETURN_NULL();
  }
  if (status != SHMLINK_OK) {
    PHP_SHMLINK_COUNT(errors);
    php_shmlink_throw_answer(status, id);
    RETURN_THROWS();
  }
  zval response;
  response_string(s, &response);
  array_init_size(return_value, 2);
  add_next_index_long(return_value, (zend_long)id);
  add_next_index_zval(return_value, &response);
}

ZEND_METHOD(Shmlink_Client, abandon) {
  zend_long id;
  ZEND_PARSE_PARAMETERS_START(1, 1)
  Z_PARAM_LONG(id)
  ZEND_PARSE_PARAMETERS_END();

  /* Nothing is in flight on a closed session: no exception for giving up. */
  php_shmlink_session *s = THIS_CLIENT()->session;
  if (s == NULL || s->closed || !php_shmlink_session_owned(s) || id <= 0) {
    RETURN_FALSE;
  }
  RETURN_BOOL(shmlink_client_abandon(s->client, (uint64_t)id) == 1);
}
