/* shmlink PHP extension: Shmlink\Worker, a worker of `shmlink pool`. Its
 * loop runs on the PHP thread and waits on the ring directly: a call costs
 * what a client's call costs, with no hand-off between threads. */

#include <SAPI.h>

#include "http.h"

typedef struct {
  shmlink_worker *worker; /* NULL until constructed */
  bool http;              /* the call accepted last came from the HTTP front */
  bool pending;           /* an HTTP call accept() gave and nothing answered yet */
  bool ended;             /* the call's streamed answer was ended with end() */
  zend_object std;
} php_shmlink_worker;

static zend_object_handlers worker_handlers;

static inline php_shmlink_worker *worker_of(zend_object *obj) {
  return (php_shmlink_worker *)((char *)obj - XtOffsetOf(php_shmlink_worker, std));
}

static zend_object *worker_create(zend_class_entry *ce) {
  php_shmlink_worker *w = zend_object_alloc(sizeof(php_shmlink_worker), ce);
  zend_object_std_init(&w->std, ce);
  object_properties_init(&w->std, ce);
  w->std.handlers = &worker_handlers;
  return &w->std;
}

static void worker_free(zend_object *obj) {
  php_shmlink_worker *w = worker_of(obj);
  shmlink_worker_free(w->worker); /* says goodbye to the pool */
  w->worker = NULL;
  zend_object_std_dtor(obj);
}

static void answer_exit(shmlink_worker *w);

/* An HTTP call accept() gave and nothing answered when the worker object
 * goes (exit() between accept() and respond(): destructors run before PHP
 * flushes its output buffers): answered as exit() in run()'s handler is. */
static void worker_dtor(zend_object *obj) {
  php_shmlink_worker *w = worker_of(obj);
  if (w->pending && w->worker != NULL) {
    w->pending = false;
    answer_exit(w->worker);
  }
  zend_objects_destroy_object(obj);
}

void php_shmlink_worker_minit(zend_class_entry *ce) {
  ce->create_object = worker_create;
  memcpy(&worker_handlers, zend_get_std_object_handlers(), sizeof worker_handlers);
  worker_handlers.offset = XtOffsetOf(php_shmlink_worker, std);
  worker_handlers.free_obj = worker_free;
  worker_handlers.dtor_obj = worker_dtor;
  worker_handlers.clone_obj = NULL;
}

/* The constructed worker, or NULL after throwing. */
static shmlink_worker *this_worker(zval *this_zv) {
  php_shmlink_worker *w = worker_of(Z_OBJ_P(this_zv));
  if (w->worker == NULL) {
    zend_throw_error(NULL, "Shmlink\\Worker object is not constructed");
  }
  return w->worker;
}

ZEND_METHOD(Shmlink_Worker, __construct) {
  zend_string *address = NULL;
  HashTable *options = NULL;
  ZEND_PARSE_PARAMETERS_START(0, 2)
  Z_PARAM_OPTIONAL
  Z_PARAM_PATH_STR_OR_NULL(address)
  Z_PARAM_ARRAY_HT(options)
  ZEND_PARSE_PARAMETERS_END();

  php_shmlink_worker *w = worker_of(Z_OBJ_P(ZEND_THIS));
  if (w->worker != NULL) {
    zend_throw_error(NULL, "Shmlink\\Worker::__construct() cannot be called twice");
    RETURN_THROWS();
  }
  if (address != NULL && !php_shmlink_address_ok(address)) {
    zend_argument_value_error(
        1, "must be null, \"shm:PATH\", \"unix:PATH\" or \"tcp:HOST:PORT\", \"%s\" given",
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
  if (persistent) {
    zend_argument_value_error(2, "option \"persistent\" does not apply to a worker");
    RETURN_THROWS();
  }
  shmlink_status status =
      shmlink_worker_connect(address == NULL ? NULL : ZSTR_VAL(address), &o, &w->worker);
  if (status != SHMLINK_OK) {
    if (status == SHMLINK_E_INVALID_ARGUMENT && address == NULL) {
      /* SHMLINK_WORKER is not set: say how a worker is meant to start. */
      zend_throw_exception(php_shmlink_connect_exception_ce, shmlink_last_error(), 0);
    } else {
      php_shmlink_throw(status);
    }
    RETURN_THROWS();
  }
}

static bool answered(shmlink_status status) {
  if (status != SHMLINK_OK) {
    PHP_SHMLINK_COUNT(errors);
    php_shmlink_throw(status);
    return false;
  }
  return true;
}

/* Waits for the next call: true with the request in *out (a string, or a
 * Shmlink\HttpRequest when it came from the HTTP front: *http), false when
 * told to stop (*out untouched), or false after throwing. A call from the
 * front whose bytes do not decode is answered with an error here and the
 * next call awaited. */
static bool accept_call(shmlink_worker *w, zval *out, bool *stopped, bool *http) {
  for (;;) {
    const uint8_t *request = NULL;
    size_t len = 0;
    int stop = 0;
    shmlink_status status = shmlink_worker_accept(w, &request, &len, &stop);
    *stopped = status == SHMLINK_OK && stop != 0;
    if (status != SHMLINK_OK) {
      php_shmlink_throw(status);
      return false;
    }
    if (stop) {
      return false;
    }
    PHP_SHMLINK_COUNT(calls);
    *http = php_shmlink_http_is_request(request, len);
    if (!*http) {
      if (len == 0) {
        ZVAL_EMPTY_STRING(out);
      } else {
        ZVAL_STRINGL(out, (const char *)request, len);
      }
      return true;
    }
    char err[160];
    if (php_shmlink_http_request(request, len, out, err, sizeof err)) {
      php_shmlink_http_call_begin(w);
      return true;
    }
    if (!answered(shmlink_worker_fail(w, SHMLINK_REMOTE_HANDLER_EXCEPTION, err))) {
      return false;
    }
  }
}

/* Answers the accepted call with a handler's result; false after throwing
 * (an unusable result is answered with an error, with a warning). */
static bool respond_with(shmlink_worker *w, zval *result, bool http) {
  /* The handler is done: what PHP prints from here on (a warning) is not
   * the response's. */
  php_shmlink_stream_request(NULL);
  if (http && php_shmlink_streaming(w)) {
    /* Streamed: the result's body, if any, is the last piece. */
    return php_shmlink_stream_finish(w, Z_TYPE_P(result) == IS_UNDEF ? NULL : result);
  }
  if (http && php_shmlink_stream_began()) {
    return true; /* streamed, and over: its client left (the handler was told) */
  }
  if (http) {
    smart_str out = {0};
    if (php_shmlink_http_encode(result, &out)) {
      smart_str_0(&out);
      bool ok =
          answered(shmlink_worker_respond(w, (const uint8_t *)ZSTR_VAL(out.s), ZSTR_LEN(out.s)));
      smart_str_free(&out);
      return ok;
    }
  } else if (Z_TYPE_P(result) == IS_STRING) {
    return answered(
        shmlink_worker_respond(w, (const uint8_t *)Z_STRVAL_P(result), Z_STRLEN_P(result)));
  }
  const char *expected = http ? "string or Shmlink\\HttpResponse" : "string";
  const char *type = Z_TYPE_P(result) == IS_UNDEF ? "nothing" : zend_zval_type_name(result);
  php_error_docref(NULL, E_WARNING, "the handler returned %s, expected %s", type, expected);
  char text[160];
  snprintf(text, sizeof text, "the worker's handler returned %s, expected %s", type, expected);
  return answered(shmlink_worker_fail(w, SHMLINK_REMOTE_HANDLER_EXCEPTION, text));
}

/* Answers with the handler's exception: its message, and its code (or
 * SHMLINK_REMOTE_HANDLER_EXCEPTION when 0). Clears the exception. */
static bool fail_with_exception(shmlink_worker *w) {
  zend_object *ex = EG(exception);
  zend_class_entry *base = zend_get_exception_base(ex);
  zval rv_message, rv_code;
  zval *message = zend_read_property_ex(base, ex, ZSTR_KNOWN(ZEND_STR_MESSAGE), 1, &rv_message);
  zval *code = zend_read_property_ex(base, ex, ZSTR_KNOWN(ZEND_STR_CODE), 1, &rv_code);
  zend_long c = Z_TYPE_P(code) == IS_LONG ? Z_LVAL_P(code) : 0;
  zend_string *text = zval_get_string(message);
  zend_string *full = zend_strpprintf(0, "%s: %s", ZSTR_VAL(ex->ce->name), ZSTR_VAL(text));
  zend_string_release(text);
  zend_clear_exception();
  uint32_t wire = c != 0 ? (uint32_t)c : SHMLINK_REMOTE_HANDLER_EXCEPTION;
  bool ok = answered(shmlink_worker_fail(w, wire, ZSTR_VAL(full)));
  zend_string_release(full);
  return ok;
}

/* exit() in the handler of an HTTP call: the client gets what the request
 * printed so far, from every output buffer it left open (outermost
 * first), with the status http_response_code() set (200 when none), as
 * PHP-FPM would send it; the buffers are discarded, so nothing reaches the
 * worker's stdout. The worker then ends with the script, and the pool
 * starts another. */
static void answer_exit(shmlink_worker *w) {
  php_shmlink_stream_request(NULL);
  zval text;
  ZVAL_STR(&text, php_shmlink_output_take(false));
  if (php_shmlink_streaming(w)) {
    /* What it printed since the last flush() is the last piece (no
     * exception on failure: exit()'s unwinding is under way). */
    (void)shmlink_worker_stream_write(w, (const uint8_t *)Z_STRVAL(text), Z_STRLEN(text));
    (void)shmlink_worker_stream_end(w);
    zval_ptr_dtor(&text);
    return;
  }
  smart_str out = {0};
  php_shmlink_http_encode(&text, &out); /* with header() and http_response_code() */
  smart_str_0(&out);
  /* No exception on failure: exit()'s unwinding is under way. */
  (void)shmlink_worker_respond(w, (const uint8_t *)ZSTR_VAL(out.s), ZSTR_LEN(out.s));
  smart_str_free(&out);
  zval_ptr_dtor(&text);
}

ZEND_METHOD(Shmlink_Worker, run) {
  zend_fcall_info fci;
  zend_fcall_info_cache fcc;
  ZEND_PARSE_PARAMETERS_START(1, 1)
  Z_PARAM_FUNC(fci, fcc)
  ZEND_PARSE_PARAMETERS_END();

  shmlink_worker *w = this_worker(ZEND_THIS);
  if (w == NULL) {
    RETURN_THROWS();
  }
  php_shmlink_worker *self = worker_of(Z_OBJ_P(ZEND_THIS));
  for (;;) {
    zval request, result;
    bool stopped, http;
    self->ended = false;
    if (!accept_call(w, &request, &stopped, &http)) {
      if (stopped) {
        return;
      }
      RETURN_THROWS();
    }
    self->http = http; /* for stream(), write() and end() */
    ZVAL_UNDEF(&result);
    fci.retval = &result;
    fci.params = &request;
    fci.param_count = 1;
    zend_result called = zend_call_function(&fci, &fcc);
    zval_ptr_dtor(&request);
    bool ok;
    if (EG(exception) != NULL) {
      if (zend_is_unwind_exit(EG(exception)) || zend_is_graceful_exit(EG(exception))) {
        zval_ptr_dtor(&result);
        if (http) {
          answer_exit(w);
        }
        return; /* exit() in the handler: let it end the script */
      }
      ok = fail_with_exception(w);
    } else if (self->ended) {
      ok = true; /* answered: stream() ... end() */
    } else {
      if (called != SUCCESS) {
        zval_ptr_dtor(&result);
        ZVAL_UNDEF(&result);
      }
      ok = respond_with(w, &result, http);
    }
    zval_ptr_dtor(&result);
    if (http) {
      php_shmlink_http_call_end();
    }
    if (!ok) {
      RETURN_THROWS();
    }
  }
}

ZEND_METHOD(Shmlink_Worker, accept) {
  ZEND_PARSE_PARAMETERS_NONE();
  shmlink_worker *w = this_worker(ZEND_THIS);
  if (w == NULL) {
    RETURN_THROWS();
  }
  bool stopped;
  php_shmlink_worker *self = worker_of(Z_OBJ_P(ZEND_THIS));
  php_shmlink_http_call_end(); /* the previous call is over */
  self->pending = false;
  if (!accept_call(w, return_value, &stopped, &self->http)) {
    if (stopped) {
      RETURN_NULL();
    }
    RETURN_THROWS();
  }
  self->pending = self->http;
}

ZEND_METHOD(Shmlink_Worker, respond) {
  zval *response;
  ZEND_PARSE_PARAMETERS_START(1, 1)
  Z_PARAM_ZVAL(response)
  ZEND_PARSE_PARAMETERS_END();
  shmlink_worker *w = this_worker(ZEND_THIS);
  if (w == NULL) {
    RETURN_THROWS();
  }
  php_shmlink_worker *self = worker_of(Z_OBJ_P(ZEND_THIS));
  bool http = self->http;
  if (!http && Z_TYPE_P(response) != IS_STRING) {
    zend_argument_type_error(1, "must be of type string for a call that is not HTTP, %s given",
                             zend_zval_type_name(response));
    RETURN_THROWS();
  }
  self->pending = false;
  if (!respond_with(w, response, http)) {
    RETURN_THROWS();
  }
}

ZEND_METHOD(Shmlink_Worker, fail) {
  zend_long code;
  zend_string *message;
  ZEND_PARSE_PARAMETERS_START(2, 2)
  Z_PARAM_LONG(code)
  Z_PARAM_STR(message)
  ZEND_PARSE_PARAMETERS_END();
  if (code < 0 || code > UINT32_MAX) {
    zend_argument_value_error(1, "must be between 0 and 4294967295, " ZEND_LONG_FMT " given", code);
    RETURN_THROWS();
  }
  if (memchr(ZSTR_VAL(message), 0, ZSTR_LEN(message)) != NULL) {
    zend_argument_value_error(2, "must not contain NUL bytes");
    RETURN_THROWS();
  }
  shmlink_worker *w = this_worker(ZEND_THIS);
  if (w == NULL) {
    RETURN_THROWS();
  }
  worker_of(Z_OBJ_P(ZEND_THIS))->pending = false;
  if (!answered(shmlink_worker_fail(w, (uint32_t)code, ZSTR_VAL(message)))) {
    RETURN_THROWS();
  }
}

/* The worker, constructed and handling an HTTP call accept() or run() gave;
 * NULL after throwing. */
static shmlink_worker *http_worker(zval *this_zv, const char *method) {
  shmlink_worker *w = this_worker(this_zv);
  if (w == NULL) {
    return NULL;
  }
  php_shmlink_worker *self = worker_of(Z_OBJ_P(this_zv));
  if (!self->http) {
    zend_throw_error(NULL, "Shmlink\\Worker::%s(): no HTTP request is being answered", method);
    return NULL;
  }
  return w;
}

ZEND_METHOD(Shmlink_Worker, stream) {
  zval *head = NULL;
  ZEND_PARSE_PARAMETERS_START(0, 1)
  Z_PARAM_OPTIONAL
  Z_PARAM_ZVAL(head)
  ZEND_PARSE_PARAMETERS_END();
  shmlink_worker *w = http_worker(ZEND_THIS, "stream");
  if (w == NULL) {
    RETURN_THROWS();
  }
  if (php_shmlink_streaming(w)) {
    zend_throw_error(NULL, "Shmlink\\Worker::stream(): the response is being streamed already");
    RETURN_THROWS();
  }
  zval empty;
  ZVAL_EMPTY_STRING(&empty);
  if (!php_shmlink_stream_begin(w, head != NULL ? head : &empty)) {
    RETURN_THROWS();
  }
}

ZEND_METHOD(Shmlink_Worker, write) {
  zend_string *data;
  ZEND_PARSE_PARAMETERS_START(1, 1)
  Z_PARAM_STR(data)
  ZEND_PARSE_PARAMETERS_END();
  shmlink_worker *w = http_worker(ZEND_THIS, "write");
  if (w == NULL) {
    RETURN_THROWS();
  }
  if (!php_shmlink_streaming(w)) {
    zend_throw_error(
        NULL, "Shmlink\\Worker::write(): no response is being streamed (stream() starts one)");
    RETURN_THROWS();
  }
  if (!php_shmlink_stream_write(w, ZSTR_VAL(data), ZSTR_LEN(data))) {
    RETURN_THROWS();
  }
}

ZEND_METHOD(Shmlink_Worker, end) {
  ZEND_PARSE_PARAMETERS_NONE();
  shmlink_worker *w = http_worker(ZEND_THIS, "end");
  if (w == NULL) {
    RETURN_THROWS();
  }
  if (!php_shmlink_streaming(w)) {
    zend_throw_error(NULL, "Shmlink\\Worker::end(): no response is being streamed");
    RETURN_THROWS();
  }
  php_shmlink_worker *self = worker_of(Z_OBJ_P(ZEND_THIS));
  self->pending = false;
  self->ended = true;
  php_shmlink_stream_request(NULL);
  if (!php_shmlink_stream_finish(w, NULL)) {
    RETURN_THROWS();
  }
}
