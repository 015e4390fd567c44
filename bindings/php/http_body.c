/* shmlink PHP extension: a request's body as a stream. Small bodies come in
 * the request itself; one the pool's server spooled to an unnamed file
 * (over --http-spool-over) is named by its x-shmlink-body-file header
 * (/proc/PID/fd/FD) and read from that file, never loaded whole:
 * HttpRequest::bodyStream(), php://input after globals(), and the multipart
 * parser that fills $_FILES all read it in blocks. */

#include <fcntl.h>
#include <unistd.h>

#include "SAPI.h"
#include "http.h"

#define BODY_FILE_HEADER "x-shmlink-body-file"

/* The path the request's body was spooled to, or NULL. */
static zend_string *body_file(zend_object *req) {
  zval *headers = OBJ_PROP_NUM(req, HTTP_REQ_HEADERS);
  if (Z_TYPE_P(headers) != IS_ARRAY) {
    return NULL;
  }
  zval *list = zend_hash_str_find(Z_ARRVAL_P(headers), ZEND_STRL(BODY_FILE_HEADER));
  zval *first =
      list == NULL || Z_TYPE_P(list) != IS_ARRAY ? NULL : zend_hash_index_find(Z_ARRVAL_P(list), 0);
  return first != NULL && Z_TYPE_P(first) == IS_STRING ? Z_STR_P(first) : NULL;
}

bool php_shmlink_http_body_spooled(zend_object *req) { return body_file(req) != NULL; }

php_stream *php_shmlink_http_body_stream(zend_object *req) {
  zend_string *path = body_file(req);
  if (path != NULL) {
    /* open(2) itself: PHP's own opener resolves the /proc link to the
     * file's former name, which an unnamed file does not have. A new open
     * file description, read from its start. */
    int fd = open(ZSTR_VAL(path), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      zend_throw_exception_ex(php_shmlink_exception_ce, 0,
                              "the request's spooled body %s cannot be opened: %s (a worker "
                              "running as another user than the pool's server cannot read it)",
                              ZSTR_VAL(path), strerror(errno));
      return NULL;
    }
    php_stream *s = php_stream_fopen_from_fd(fd, "rb", NULL);
    if (s == NULL) {
      close(fd);
    }
    return s;
  }
  zval *body = OBJ_PROP_NUM(req, HTTP_REQ_BODY);
  php_stream *s = php_stream_temp_create(TEMP_STREAM_DEFAULT, SAPI_POST_BLOCK_SIZE);
  if (s != NULL && Z_TYPE_P(body) == IS_STRING) {
    php_stream_write(s, Z_STRVAL_P(body), Z_STRLEN_P(body));
    php_stream_rewind(s);
  }
  return s;
}

/* php://input of the call: its body stream, set where php://input reads. */
static php_stream *input = NULL;

bool php_shmlink_http_input_set(zend_object *req) {
  php_shmlink_http_input_clear();
  php_stream *s = php_shmlink_http_body_stream(req);
  if (s == NULL) {
    return false;
  }
  input = s;
  SG(request_info).request_body = s;
  SG(post_read) = 1; /* nothing more to read from the SAPI */
  return true;
}

void php_shmlink_http_input_clear(void) {
  if (input != NULL) {
    if (SG(request_info).request_body == input) {
      SG(request_info).request_body = NULL;
    }
    php_stream_close(input);
    input = NULL;
  }
}

ZEND_METHOD(Shmlink_HttpRequest, bodyStream) {
  ZEND_PARSE_PARAMETERS_NONE();
  php_stream *s = php_shmlink_http_body_stream(Z_OBJ_P(ZEND_THIS));
  if (s == NULL) {
    RETURN_THROWS();
  }
  php_stream_to_zval(s, return_value);
}
