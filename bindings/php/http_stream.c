/* shmlink PHP extension: HTTP responses a worker streams. Explicitly
 * (Shmlink\Worker::stream(), write(), end()), or as a classic script does
 * under PHP-FPM: flush() sends the status and headers set so far and what
 * the output buffers hold, and what reaches PHP's output once streaming
 * (ob_flush() down to the last level, echo without a buffer) goes to the
 * client. The pool's server writes each piece before the call returns
 * (chunked in HTTP/1.1); a client that is gone ends the request with a
 * Shmlink\ClosedException. */

#include <SAPI.h>
#include <main/php_output.h>

#include "http.h"

/* The worker whose HTTP call is being handled, for the SAPI hooks. */
static shmlink_worker *current;
/* The current call's answer began streaming (it may be over since). */
static bool began;
static size_t (*cli_ub_write)(const char *, size_t);
static void (*cli_flush)(void *);

static bool ok_or_throw(shmlink_status status) {
  if (status != SHMLINK_OK) {
    current = NULL; /* the request is over: nothing more goes to it */
    php_shmlink_throw(status);
    return false;
  }
  return true;
}

bool php_shmlink_stream_begin(shmlink_worker *w, zval *head) {
  smart_str out = {0};
  if (!php_shmlink_http_encode(head, &out)) {
    zend_type_error(
        "Shmlink\\Worker::stream(): the head must be a string or a "
        "Shmlink\\HttpResponse, %s given",
        zend_zval_type_name(head));
    return false;
  }
  smart_str_0(&out);
  began = true;
  shmlink_status s =
      shmlink_worker_stream_begin(w, (const uint8_t *)ZSTR_VAL(out.s), ZSTR_LEN(out.s));
  smart_str_free(&out);
  return ok_or_throw(s);
}

bool php_shmlink_stream_write(shmlink_worker *w, const char *data, size_t len) {
  return ok_or_throw(shmlink_worker_stream_write(w, (const uint8_t *)data, len));
}

bool php_shmlink_stream_finish(shmlink_worker *w, zval *last) {
  if (last != NULL) {
    zval *body = last;
    if (Z_TYPE_P(last) == IS_OBJECT && Z_OBJCE_P(last) == php_shmlink_http_response_ce) {
      body = OBJ_PROP_NUM(Z_OBJ_P(last), HTTP_RESP_BODY);
    }
    if (Z_TYPE_P(body) == IS_STRING && Z_STRLEN_P(body) > 0 &&
        !php_shmlink_stream_write(w, Z_STRVAL_P(body), Z_STRLEN_P(body))) {
      (void)shmlink_worker_stream_end(w);
      return false;
    }
  }
  return ok_or_throw(shmlink_worker_stream_end(w));
}

bool php_shmlink_streaming(shmlink_worker *w) {
  return w != NULL && shmlink_worker_is_streaming(w) != 0;
}

void php_shmlink_stream_request(shmlink_worker *w) {
  if (w != NULL) {
    began = false;
  }
  current = w;
}

bool php_shmlink_stream_began(void) { return began; }

zend_string *php_shmlink_output_take(bool reopen) {
  int levels = php_output_get_level();
  if (levels <= 0) {
    return ZSTR_EMPTY_ALLOC();
  }
  if (levels == 1 && reopen) {
    zval part;
    zend_string *s = php_output_get_contents(&part) == SUCCESS && Z_TYPE(part) == IS_STRING
                         ? Z_STR(part)
                         : ZSTR_EMPTY_ALLOC();
    php_output_clean();
    return s;
  }
  zend_string **parts = safe_emalloc((size_t)levels, sizeof(zend_string *), 0);
  for (int i = levels - 1; i >= 0; i--) {
    zval part;
    parts[i] = php_output_get_contents(&part) == SUCCESS && Z_TYPE(part) == IS_STRING
                   ? Z_STR(part)
                   : ZSTR_EMPTY_ALLOC();
    php_output_discard();
  }
  smart_str all = {0};
  for (int i = 0; i < levels; i++) {
    smart_str_append(&all, parts[i]);
    zend_string_release(parts[i]);
    if (reopen) {
      php_output_start_default();
    }
  }
  efree(parts);
  smart_str_0(&all);
  return all.s != NULL ? all.s : ZSTR_EMPTY_ALLOC();
}

/* flush() during an HTTP call: the response so far goes to the client. */
static void stream_flush(void *server_context) {
  shmlink_worker *w = current;
  if (w == NULL || EG(exception) != NULL) {
    cli_flush(server_context);
    return;
  }
  zend_string *buffered = php_shmlink_output_take(true);
  bool ok;
  if (php_shmlink_streaming(w)) {
    ok = ZSTR_LEN(buffered) == 0 ||
         php_shmlink_stream_write(w, ZSTR_VAL(buffered), ZSTR_LEN(buffered));
  } else {
    zval head;
    ZVAL_STR_COPY(&head, buffered);
    ok = php_shmlink_stream_begin(w, &head);
    zval_ptr_dtor(&head);
  }
  zend_string_release(buffered);
  (void)ok;
}

/* PHP's own output while a response streams goes to the client. */
static size_t stream_ub_write(const char *str, size_t len) {
  shmlink_worker *w = current;
  if (w == NULL || !php_shmlink_streaming(w) || EG(exception) != NULL) {
    return cli_ub_write(str, len);
  }
  (void)php_shmlink_stream_write(w, str, len);
  return len;
}

void php_shmlink_stream_minit(void) {
  /* Only where a worker runs: the command-line SAPI. */
  if (sapi_module.name == NULL || strcmp(sapi_module.name, "cli") != 0 || cli_ub_write != NULL) {
    return;
  }
  cli_ub_write = sapi_module.ub_write;
  cli_flush = sapi_module.flush;
  sapi_module.ub_write = stream_ub_write;
  sapi_module.flush = stream_flush;
}
