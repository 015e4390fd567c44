/* shmlink PHP extension: Shmlink\HttpRequest made from the HTTP front's
 * encoding, Shmlink\HttpResponse encoded back. Every length read from the
 * call's bytes is checked against what is left (the pool is trusted, but a
 * worker never reads out of bounds). */

#include "http.h"

zend_class_entry *php_shmlink_http_request_ce;
zend_class_entry *php_shmlink_http_response_ce;

static const char REQUEST_MAGIC[4] = {'S', 'L', 'H', 'Q'};
static const char RESPONSE_MAGIC[4] = {'S', 'L', 'H', 'R'};

typedef struct {
  const uint8_t *p;
  size_t left;
} reader;

static bool read_u32(reader *r, uint32_t *out) {
  if (r->left < 4) {
    return false;
  }
  *out = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 |
         (uint32_t)r->p[3] << 24;
  r->p += 4;
  r->left -= 4;
  return true;
}

static bool read_str(reader *r, const char **s, size_t *len) {
  uint32_t n;
  if (!read_u32(r, &n) || n > r->left) {
    return false;
  }
  *s = (const char *)r->p;
  *len = n;
  r->p += n;
  r->left -= n;
  return true;
}

bool php_shmlink_http_is_request(const uint8_t *bytes, size_t len) {
  return len >= 4 && memcmp(bytes, REQUEST_MAGIC, 4) == 0;
}

static void set_str(zend_object *obj, int slot, const char *s, size_t len) {
  ZVAL_STRINGL_FAST(OBJ_PROP_NUM(obj, slot), s, len);
}

/* Files one header under its lower-case name, as a list of values. */
static void add_header(HashTable *headers, const char *name, size_t nlen, const char *value,
                       size_t vlen) {
  zend_string *key = zend_string_alloc(nlen, 0);
  zend_str_tolower_copy(ZSTR_VAL(key), name, nlen);
  zval *list = zend_hash_find(headers, key);
  if (list == NULL) {
    zval fresh;
    array_init_size(&fresh, 1);
    list = zend_hash_add_new(headers, key, &fresh);
  }
  zend_string_release(key);
  add_next_index_stringl(list, value, vlen);
}

bool php_shmlink_http_request(const uint8_t *bytes, size_t len, zval *out, char *err,
                              size_t errlen) {
  reader r = {bytes + 4, len - 4};
  uint32_t count;
  const char *method, *target, *protocol, *remote, *body;
  size_t mlen, tlen, plen, rlen, blen;
  if (!php_shmlink_http_is_request(bytes, len) || !read_u32(&r, &count) ||
      !read_str(&r, &method, &mlen) || !read_str(&r, &target, &tlen) ||
      !read_str(&r, &protocol, &plen) || !read_str(&r, &remote, &rlen)) {
    snprintf(err, errlen, "the HTTP request's head is cut short");
    return false;
  }
  /* Each header takes at least 8 bytes: a larger count is a lie. */
  if (count > r.left / 8) {
    snprintf(err, errlen, "the HTTP request claims %u headers in %zu bytes", count, r.left);
    return false;
  }
  zval headers;
  array_init_size(&headers, count);
  for (uint32_t i = 0; i < count; i++) {
    const char *name, *value;
    size_t nlen, vlen;
    if (!read_str(&r, &name, &nlen) || !read_str(&r, &value, &vlen)) {
      zval_ptr_dtor(&headers);
      snprintf(err, errlen, "the HTTP request's header %u is cut short", i);
      return false;
    }
    add_header(Z_ARRVAL(headers), name, nlen, value, vlen);
  }
  if (!read_str(&r, &body, &blen) || r.left != 0) {
    zval_ptr_dtor(&headers);
    snprintf(err, errlen, "the HTTP request's body is cut short or followed by %zu bytes", r.left);
    return false;
  }
  object_init_ex(out, php_shmlink_http_request_ce);
  zend_object *obj = Z_OBJ_P(out);
  const char *q = memchr(target, '?', tlen);
  size_t path_len = q == NULL ? tlen : (size_t)(q - target);
  set_str(obj, HTTP_REQ_METHOD, method, mlen);
  set_str(obj, HTTP_REQ_URI, target, tlen);
  set_str(obj, HTTP_REQ_PATH, target, path_len);
  if (q == NULL) {
    ZVAL_EMPTY_STRING(OBJ_PROP_NUM(obj, HTTP_REQ_QUERY));
  } else {
    set_str(obj, HTTP_REQ_QUERY, q + 1, tlen - path_len - 1);
  }
  set_str(obj, HTTP_REQ_PROTOCOL, protocol, plen);
  ZVAL_COPY_VALUE(OBJ_PROP_NUM(obj, HTTP_REQ_HEADERS), &headers);
  set_str(obj, HTTP_REQ_BODY, body, blen);
  set_str(obj, HTTP_REQ_REMOTE, remote, rlen);
  return true;
}

static void put_u32(smart_str *out, uint32_t n) {
  char b[4] = {(char)(n & 0xff), (char)(n >> 8 & 0xff), (char)(n >> 16 & 0xff), (char)(n >> 24)};
  smart_str_appendl(out, b, 4);
}

static void put_str(smart_str *out, const char *s, size_t len) {
  put_u32(out, (uint32_t)len);
  smart_str_appendl(out, s, len);
}

static const char DEFAULT_TYPE[] = "text/html; charset=UTF-8";

/* Appends the encoding; headers already checked by the constructor. */
static void encode(smart_str *out, zend_long status, zend_string *body, HashTable *headers) {
  smart_str_appendl(out, RESPONSE_MAGIC, 4);
  put_u32(out, (uint32_t)status);
  size_t count_at = ZSTR_LEN(out->s);
  put_u32(out, 0); /* the header count, written after the headers */
  uint32_t count = 0;
  bool typed = false;
  if (headers != NULL) {
    zend_string *name;
    zval *value;
    ZEND_HASH_FOREACH_STR_KEY_VAL(headers, name, value) {
      typed = typed || zend_string_equals_literal_ci(name, "content-type");
      if (Z_TYPE_P(value) == IS_ARRAY) {
        zval *v;
        ZEND_HASH_FOREACH_VAL(Z_ARRVAL_P(value), v) {
          put_str(out, ZSTR_VAL(name), ZSTR_LEN(name));
          put_str(out, Z_STRVAL_P(v), Z_STRLEN_P(v));
          count++;
        }
        ZEND_HASH_FOREACH_END();
      } else {
        put_str(out, ZSTR_VAL(name), ZSTR_LEN(name));
        put_str(out, Z_STRVAL_P(value), Z_STRLEN_P(value));
        count++;
      }
    }
    ZEND_HASH_FOREACH_END();
  }
  if (!typed) {
    put_str(out, "content-type", sizeof "content-type" - 1);
    put_str(out, DEFAULT_TYPE, sizeof DEFAULT_TYPE - 1);
    count++;
  }
  char *c = ZSTR_VAL(out->s) + count_at;
  c[0] = (char)(count & 0xff);
  c[1] = (char)(count >> 8 & 0xff);
  c[2] = (char)(count >> 16 & 0xff);
  c[3] = (char)(count >> 24);
  put_str(out, ZSTR_VAL(body), ZSTR_LEN(body));
}

/* Whether `headers` has `name`, in any case. */
static bool has_header(HashTable *headers, zend_string *name) {
  zend_string *key;
  ZEND_HASH_FOREACH_STR_KEY(headers, key) {
    if (key != NULL && zend_string_equals_ci(key, name)) {
      return true;
    }
  }
  ZEND_HASH_FOREACH_END();
  return false;
}

bool php_shmlink_http_encode(zval *answer, smart_str *out) {
  /* What header() and http_response_code() set during the call: under a
   * string answer's default status and type; an HttpResponse's own status
   * and headers win over them. */
  HashTable set;
  zend_hash_init(&set, 8, NULL, ZVAL_PTR_DTOR, 0);
  int code = php_shmlink_http_headers_take(&set);
  bool ok = false;
  if (Z_TYPE_P(answer) == IS_STRING) {
    encode(out, code != 0 ? code : 200, Z_STR_P(answer), &set);
    ok = true;
  } else if (Z_TYPE_P(answer) == IS_OBJECT && Z_OBJCE_P(answer) == php_shmlink_http_response_ce) {
    zend_object *obj = Z_OBJ_P(answer);
    zval *status = OBJ_PROP_NUM(obj, HTTP_RESP_STATUS);
    zval *body = OBJ_PROP_NUM(obj, HTTP_RESP_BODY);
    zval *headers = OBJ_PROP_NUM(obj, HTTP_RESP_HEADERS);
    if (Z_TYPE_P(status) == IS_LONG && Z_TYPE_P(body) == IS_STRING &&
        Z_TYPE_P(headers) == IS_ARRAY) { /* else: not constructed */
      HashTable *all = zend_array_dup(Z_ARRVAL_P(headers));
      zend_string *name;
      zval *values;
      ZEND_HASH_FOREACH_STR_KEY_VAL(&set, name, values) {
        if (!has_header(Z_ARRVAL_P(headers), name)) {
          Z_TRY_ADDREF_P(values);
          zend_hash_update(all, name, values);
        }
      }
      ZEND_HASH_FOREACH_END();
      encode(out, Z_LVAL_P(status), Z_STR_P(body), all);
      zend_array_release(all);
      ok = true;
    }
  }
  zend_hash_destroy(&set);
  return ok;
}

ZEND_METHOD(Shmlink_HttpRequest, __construct) { ZEND_PARSE_PARAMETERS_NONE(); }

ZEND_METHOD(Shmlink_HttpRequest, header) {
  zend_string *name;
  ZEND_PARSE_PARAMETERS_START(1, 1)
  Z_PARAM_STR(name)
  ZEND_PARSE_PARAMETERS_END();
  zval *headers = OBJ_PROP_NUM(Z_OBJ_P(ZEND_THIS), HTTP_REQ_HEADERS);
  if (Z_TYPE_P(headers) != IS_ARRAY) {
    RETURN_NULL();
  }
  zend_string *lower = zend_string_tolower(name);
  zval *list = zend_hash_find(Z_ARRVAL_P(headers), lower);
  zend_string_release(lower);
  zval *first = list == NULL ? NULL : zend_hash_index_find(Z_ARRVAL_P(list), 0);
  if (first == NULL) {
    RETURN_NULL();
  }
  RETURN_COPY(first);
}

ZEND_METHOD(Shmlink_HttpRequest, globals) {
  ZEND_PARSE_PARAMETERS_NONE();
  php_shmlink_http_globals(Z_OBJ_P(ZEND_THIS));
}

/* A header name is a token (RFC 9110); a value has no CR, LF or NUL. */
static bool header_name_ok(const zend_string *name) {
  if (ZSTR_LEN(name) == 0) {
    return false;
  }
  for (size_t i = 0; i < ZSTR_LEN(name); i++) {
    unsigned char c = (unsigned char)ZSTR_VAL(name)[i];
    if (c <= 32 || c >= 127 || strchr("\"(),/:;<=>?@[\\]{}", c) != NULL) {
      return false;
    }
  }
  return true;
}

static bool header_value_ok(const zend_string *value) {
  return strpbrk(ZSTR_VAL(value), "\r\n") == NULL &&
         memchr(ZSTR_VAL(value), 0, ZSTR_LEN(value)) == NULL;
}

/* One header value as a string; NULL after throwing. */
static zend_string *header_value(zend_string *name, zval *v) {
  if (Z_TYPE_P(v) == IS_ARRAY) {
    zend_argument_type_error(3, "must map header \"%s\" to a string or a list of strings",
                             ZSTR_VAL(name));
    return NULL;
  }
  zend_string *s = zval_try_get_string(v);
  if (s != NULL && !header_value_ok(s)) {
    zend_argument_value_error(3, "has a line break or NUL in header \"%s\"", ZSTR_VAL(name));
    zend_string_release(s);
    return NULL;
  }
  return s;
}

/* Checks the headers and makes every value a string (or a list of strings)
 * in *out; false after throwing. */
static bool checked_headers(HashTable *in, zval *out) {
  array_init_size(out, zend_hash_num_elements(in));
  zend_string *name;
  zend_ulong index;
  zval *value;
  ZEND_HASH_FOREACH_KEY_VAL(in, index, name, value) {
    if (name == NULL) {
      zend_argument_value_error(3, "must have header names as keys, " ZEND_ULONG_FMT " given",
                                index);
      zval_ptr_dtor(out);
      return false;
    }
    if (!header_name_ok(name)) {
      zend_argument_value_error(3, "has an invalid header name \"%s\"", ZSTR_VAL(name));
      zval_ptr_dtor(out);
      return false;
    }
    zval item;
    if (Z_TYPE_P(value) == IS_ARRAY) {
      array_init(&item);
      zval *v;
      ZEND_HASH_FOREACH_VAL(Z_ARRVAL_P(value), v) {
        zend_string *s = header_value(name, v);
        if (s == NULL) {
          zval_ptr_dtor(&item);
          zval_ptr_dtor(out);
          return false;
        }
        add_next_index_str(&item, s);
      }
      ZEND_HASH_FOREACH_END();
    } else {
      zend_string *s = header_value(name, value);
      if (s == NULL) {
        zval_ptr_dtor(out);
        return false;
      }
      ZVAL_STR(&item, s);
    }
    zend_hash_add_new(Z_ARRVAL_P(out), name, &item);
  }
  ZEND_HASH_FOREACH_END();
  return true;
}

ZEND_METHOD(Shmlink_HttpResponse, __construct) {
  zend_long status = 200;
  zend_string *body = NULL;
  HashTable *headers = NULL;
  ZEND_PARSE_PARAMETERS_START(0, 3)
  Z_PARAM_OPTIONAL
  Z_PARAM_LONG(status)
  Z_PARAM_STR(body)
  Z_PARAM_ARRAY_HT(headers)
  ZEND_PARSE_PARAMETERS_END();
  zend_object *obj = Z_OBJ_P(ZEND_THIS);
  if (Z_TYPE_P(OBJ_PROP_NUM(obj, HTTP_RESP_STATUS)) != IS_UNDEF) {
    zend_throw_error(NULL, "Cannot modify readonly Shmlink\\HttpResponse");
    RETURN_THROWS();
  }
  if (status < 100 || status > 999) {
    zend_argument_value_error(1, "must be between 100 and 999, " ZEND_LONG_FMT " given", status);
    RETURN_THROWS();
  }
  zval checked;
  if (headers == NULL) {
    array_init(&checked);
  } else if (!checked_headers(headers, &checked)) {
    RETURN_THROWS();
  }
  ZVAL_LONG(OBJ_PROP_NUM(obj, HTTP_RESP_STATUS), status);
  if (body == NULL) {
    ZVAL_EMPTY_STRING(OBJ_PROP_NUM(obj, HTTP_RESP_BODY));
  } else {
    ZVAL_STR_COPY(OBJ_PROP_NUM(obj, HTTP_RESP_BODY), body);
  }
  ZVAL_COPY_VALUE(OBJ_PROP_NUM(obj, HTTP_RESP_HEADERS), &checked);
}
