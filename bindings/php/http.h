/* shmlink PHP extension: Shmlink\HttpRequest and Shmlink\HttpResponse, and
 * the binary encoding the pool's HTTP front uses (docs/protocol.md, "HTTP
 * calls"). */
#ifndef PHP_SHMLINK_HTTP_H
#define PHP_SHMLINK_HTTP_H

#include "Zend/zend_smart_str.h"
#include "php_shmlink.h"

extern zend_class_entry *php_shmlink_http_request_ce;
extern zend_class_entry *php_shmlink_http_response_ce;

/* Property slots, in the stub's declaration order. */
enum {
  HTTP_REQ_METHOD,
  HTTP_REQ_URI,
  HTTP_REQ_PATH,
  HTTP_REQ_QUERY,
  HTTP_REQ_PROTOCOL,
  HTTP_REQ_HEADERS,
  HTTP_REQ_BODY,
  HTTP_REQ_REMOTE,
};
enum { HTTP_RESP_STATUS, HTTP_RESP_BODY, HTTP_RESP_HEADERS };

/* Whether a call's request came from the HTTP front (starts with "SLHQ"). */
bool php_shmlink_http_is_request(const uint8_t *bytes, size_t len);

/* Decodes an encoded request into a new Shmlink\HttpRequest in *out; false
 * with the reason in err when the bytes are not a valid encoding. */
bool php_shmlink_http_request(const uint8_t *bytes, size_t len, zval *out, char *err,
                              size_t errlen);

/* Encodes a handler's answer to an HTTP call: a string (200, text/html) or
 * a Shmlink\HttpResponse, with what header(), setcookie() and
 * http_response_code() set during the call (which it clears). False (out
 * untouched) for anything else. */
bool php_shmlink_http_encode(zval *answer, smart_str *out);

/* http_headers.c: header(), setcookie() and http_response_code() during an
 * HTTP call. _begin at each call clears what the previous one set (and the
 * output buffers it left open); _take
 * moves the headers set into `into` (name => list of values) and returns
 * the status set (0 when none), clearing both. */
void php_shmlink_http_headers_begin(void);
int php_shmlink_http_headers_take(HashTable *into);
void php_shmlink_http_headers_shutdown(void);

/* http_globals.c: fills the superglobals from a request object. */
void php_shmlink_http_globals(zend_object *request);
void php_shmlink_http_globals_shutdown(void);
/* After a call from the front: removes the files its request uploaded. */
void php_shmlink_http_request_done(void);

/* http_body.c: a request's body as a stream (from memory, or the file
 * the server spooled it to: the x-shmlink-body-file header); NULL after
 * throwing. _input_set makes it php://input for the call (false after
 * throwing), _input_clear closes it. */
bool php_shmlink_http_body_spooled(zend_object *req);
php_stream *php_shmlink_http_body_stream(zend_object *req);
bool php_shmlink_http_input_set(zend_object *req);
void php_shmlink_http_input_clear(void);

/* http_stream.c: responses a worker streams. _request names the worker
 * whose HTTP call runs (NULL between calls), for flush() and PHP's output;
 * _begin sends a head (a string or HttpResponse, with header() and
 * http_response_code()), _write a piece, _finish the handler's last answer
 * (its body, if any) and the end; each false after throwing. */
void php_shmlink_stream_minit(void);
/* What the output buffers hold, outermost first, taken out of them; with
 * `reopen` as many (plain) buffers are left open as there were, for the
 * script's own ob_get_clean() and the like. */
zend_string *php_shmlink_output_take(bool reopen);
void php_shmlink_stream_request(shmlink_worker *w);
bool php_shmlink_streaming(shmlink_worker *w);
bool php_shmlink_stream_began(void);
bool php_shmlink_stream_begin(shmlink_worker *w, zval *head);
bool php_shmlink_stream_write(shmlink_worker *w, const char *data, size_t len);
bool php_shmlink_stream_finish(shmlink_worker *w, zval *last);

/* What every HTTP call a worker takes starts with (header() and
 * http_response_code() start empty, the output buffers it left open are
 * gone, flush() and PHP's output reach the call's client) and ends with
 * (its uploaded files, php://input and the stream hooks are let go). */
void php_shmlink_http_call_begin(shmlink_worker *w);
void php_shmlink_http_call_end(void);
#endif /* PHP_SHMLINK_HTTP_H */
