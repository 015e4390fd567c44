/* shmlink PHP extension: what a worker's HTTP call leaves in PHP's SAPI
 * and output layers. header(), setcookie() and http_response_code(): the
 * CLI SAPI discards header(); while a worker handles an HTTP call, the
 * extension's own header handler keeps them in SAPI's list instead, and
 * the answer carries them (see http.c). Output buffers a call left open
 * are discarded when the next call begins. What a classic script sets
 * reaches its client as under PHP-FPM, and nothing of one call is left
 * for the next. */

#include <SAPI.h>

#include "http.h"

static int (*cli_header_handler)(sapi_header_struct *, sapi_header_op_enum,
                                 sapi_headers_struct *) = NULL;
static bool installed = false;
/* The output buffering level outside any call (the script's own). */
static int base_level = 0;

/* Keeps every header (SAPI then applies replace and remove itself). */
static int keep_header(sapi_header_struct *h, sapi_header_op_enum op, sapi_headers_struct *s) {
  (void)h;
  (void)op;
  (void)s;
  return SAPI_HEADER_ADD;
}

void php_shmlink_http_headers_begin(void) {
  if (!installed) {
    cli_header_handler = sapi_module.header_handler;
    sapi_module.header_handler = keep_header;
    installed = true;
    base_level = php_output_get_level();
  }
  /* Output buffers the previous call left open go, with what they hold. */
  while (php_output_get_level() > base_level) {
    php_output_discard();
  }
  zend_llist_clean(&SG(sapi_headers).headers);
  SG(sapi_headers).http_response_code = 0;
  SG(headers_sent) = 0;
  SG(request_info).no_headers = 0;
}

/* Appends "Name: value" as name => [values...] in `into`. */
static void add_line(HashTable *into, const char *line, size_t len) {
  const char *colon = memchr(line, ':', len);
  if (colon == NULL || colon == line) {
    return;
  }
  zend_string *name = zend_string_init(line, (size_t)(colon - line), 0);
  const char *v = colon + 1;
  const char *end = line + len;
  while (v < end && (*v == ' ' || *v == '\t')) {
    v++;
  }
  zval *list = zend_hash_find(into, name);
  if (list == NULL) {
    zval fresh;
    array_init(&fresh);
    list = zend_hash_add_new(into, name, &fresh);
  }
  add_next_index_stringl(list, v, (size_t)(end - v));
  zend_string_release(name);
}

int php_shmlink_http_headers_take(HashTable *into) {
  zend_llist_position pos;
  for (sapi_header_struct *h = zend_llist_get_first_ex(&SG(sapi_headers).headers, &pos); h != NULL;
       h = zend_llist_get_next_ex(&SG(sapi_headers).headers, &pos)) {
    add_line(into, h->header, h->header_len);
  }
  int status = SG(sapi_headers).http_response_code;
  zend_llist_clean(&SG(sapi_headers).headers);
  SG(sapi_headers).http_response_code = 0;
  return status >= 100 && status <= 999 ? status : 0;
}

void php_shmlink_http_headers_shutdown(void) {
  if (installed) {
    sapi_module.header_handler = cli_header_handler;
    installed = false;
  }
}
