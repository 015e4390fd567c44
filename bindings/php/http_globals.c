/* shmlink PHP extension: Shmlink\HttpRequest::globals(), the superglobals
 * of a classic script filled from one request of the HTTP front.
 *
 * $_SERVER starts each time from the worker's own (its environment, as the
 * CLI made it at start), so nothing of the previous request stays. */

#include "SAPI.h"
#include "ext/standard/php_array.h"
#include "ext/standard/php_string.h"
#include "ext/standard/url.h"
#include "http.h"
#include "main/php_variables.h"
#include "main/rfc1867.h"

/* The worker's own $_SERVER, taken at the first call. */
static zend_array *base_server = NULL;

/* The body PHP's multipart handler reads while globals() runs it. */
static php_stream *post_from = NULL;

static size_t read_body(char *buffer, size_t count) {
  ssize_t n = post_from == NULL ? 0 : php_stream_read(post_from, buffer, count);
  return n > 0 ? (size_t)n : 0;
}

void php_shmlink_http_request_done(void) {
  php_shmlink_http_input_clear();
  /* The files uploaded with the call's request go with it, as PHP-FPM
   * removes them at the end of a request. */
  if (SG(rfc1867_uploaded_files) != NULL) {
    destroy_uploaded_files_hash();
    SG(rfc1867_uploaded_files) = NULL;
  }
}

/* A multipart/form-data body into post (fields) and PG's $_FILES (files,
 * saved to upload_tmp_dir): PHP's own RFC 1867 handler, fed the body as a
 * SAPI feeds it a POST, so upload_max_filesize, max_file_uploads,
 * post_max_size and move_uploaded_file() work as under PHP-FPM. */
static void parse_multipart(zend_string *content_type, php_stream *body, zend_long length,
                            zval *post) {
  sapi_request_info saved = SG(request_info);
  size_t (*saved_read)(char *, size_t) = sapi_module.read_post;
  int64_t saved_bytes = SG(read_post_bytes);
  unsigned char saved_read_flag = SG(post_read);
  SG(request_info).content_type = ZSTR_VAL(content_type);
  SG(request_info).content_length = length;
  SG(request_info).request_method = "POST";
  SG(request_info).post_entry = NULL;
  SG(request_info).content_type_dup = NULL;
  SG(read_post_bytes) = 0;
  SG(post_read) = 0;
  post_from = body;
  sapi_module.read_post = read_body;
  sapi_read_post_data(); /* finds the multipart handler */
  sapi_handle_post(post);
  sapi_module.read_post = saved_read;
  post_from = NULL;
  SG(read_post_bytes) = saved_bytes;
  SG(post_read) = saved_read_flag;
  if (SG(request_info).content_type_dup != NULL) {
    efree(SG(request_info).content_type_dup);
  }
  SG(request_info) = saved;
}

void php_shmlink_http_globals_shutdown(void) {
  if (base_server != NULL) {
    zend_array_release(base_server);
    base_server = NULL;
  }
}

static zend_string *prop_str(zend_object *obj, int slot) {
  zval *v = OBJ_PROP_NUM(obj, slot);
  return Z_TYPE_P(v) == IS_STRING ? Z_STR_P(v) : ZSTR_EMPTY_ALLOC();
}

/* Replaces superglobal `name` (and PHP's own copy of it, when it has one). */
static void set_global(const char *name, size_t len, int track, zval *value) {
  zend_string *key = zend_string_init_interned(name, len, 0);
  Z_TRY_ADDREF_P(value);
  zend_hash_update(&EG(symbol_table), key, value);
  if (track >= 0) {
    zval_ptr_dtor(&PG(http_globals)[track]);
    ZVAL_COPY(&PG(http_globals)[track], value);
  }
  zend_string_release(key);
}

/* Parses "a=1&b[]=2" into arr, as PHP does a query string. */
static void parse_query(const char *s, size_t len, zval *arr) {
  array_init(arr);
  if (len > 0) {
    sapi_module.treat_data(PARSE_STRING, estrndup(s, len), arr);
  }
}

/* Parses a Cookie header ("a=1; b=2") into arr. */
static void parse_cookies(zend_string *header, zval *arr) {
  char *copy = estrndup(ZSTR_VAL(header), ZSTR_LEN(header));
  char *save = NULL;
  for (char *part = php_strtok_r(copy, ";", &save); part != NULL;
       part = php_strtok_r(NULL, ";", &save)) {
    while (*part == ' ' || *part == '\t') {
      part++;
    }
    char *eq = strchr(part, '=');
    if (eq == NULL || eq == part) {
      continue;
    }
    *eq = '\0';
    char *value = eq + 1;
    size_t vlen = php_url_decode(value, strlen(value));
    php_register_variable_safe(part, value, vlen, arr);
  }
  efree(copy);
}

/* HTTP_X_Y for header x-y. */
static zend_string *server_key(zend_string *name) {
  zend_string *key = zend_string_alloc(5 + ZSTR_LEN(name), 0);
  memcpy(ZSTR_VAL(key), "HTTP_", 5);
  for (size_t i = 0; i < ZSTR_LEN(name); i++) {
    char c = ZSTR_VAL(name)[i];
    ZSTR_VAL(key)[5 + i] = c == '-' ? '_' : (char)toupper((unsigned char)c);
  }
  ZSTR_VAL(key)[ZSTR_LEN(key)] = '\0';
  return key;
}

/* Values of one header joined as one line (cookies with "; "). */
static zend_string *joined(zend_string *name, zval *list) {
  const char *sep = zend_string_equals_literal(name, "cookie") ? "; " : ", ";
  zend_string *glue = zend_string_init(sep, 2, 0);
  zval out;
  php_implode(glue, Z_ARRVAL_P(list), &out);
  zend_string_release(glue);
  return Z_STR(out);
}

static void fill_server(zend_object *req, zval *server, zend_string **cookie,
                        zend_string **content_type) {
  zend_string *remote = prop_str(req, HTTP_REQ_REMOTE);
  const char *colon = zend_memrchr(ZSTR_VAL(remote), ':', ZSTR_LEN(remote));
  size_t host_len = colon == NULL ? ZSTR_LEN(remote) : (size_t)(colon - ZSTR_VAL(remote));
  HashTable *s = Z_ARRVAL_P(server);
  add_assoc_str(server, "REQUEST_METHOD", zend_string_copy(prop_str(req, HTTP_REQ_METHOD)));
  add_assoc_str(server, "REQUEST_URI", zend_string_copy(prop_str(req, HTTP_REQ_URI)));
  add_assoc_str(server, "QUERY_STRING", zend_string_copy(prop_str(req, HTTP_REQ_QUERY)));
  add_assoc_str(server, "SERVER_PROTOCOL", zend_string_copy(prop_str(req, HTTP_REQ_PROTOCOL)));
  add_assoc_stringl(server, "REMOTE_ADDR", ZSTR_VAL(remote), host_len);
  if (colon != NULL) {
    add_assoc_stringl(server, "REMOTE_PORT", colon + 1, ZSTR_LEN(remote) - host_len - 1);
  }
  struct timespec ts = {0, 0};
  clock_gettime(CLOCK_REALTIME, &ts);
  double now = (double)ts.tv_sec + ts.tv_nsec / 1e9;
  add_assoc_long(server, "REQUEST_TIME", (zend_long)now);
  add_assoc_double(server, "REQUEST_TIME_FLOAT", now);
  zval *headers = OBJ_PROP_NUM(req, HTTP_REQ_HEADERS);
  if (Z_TYPE_P(headers) != IS_ARRAY) {
    return;
  }
  zend_string *name;
  zval *list;
  ZEND_HASH_FOREACH_STR_KEY_VAL(Z_ARRVAL_P(headers), name, list) {
    if (name == NULL || Z_TYPE_P(list) != IS_ARRAY) {
      continue;
    }
    zend_string *value = joined(name, list);
    if (zend_string_equals_literal(name, "content-type")) {
      add_assoc_str(server, "CONTENT_TYPE", zend_string_copy(value));
      *content_type = zend_string_copy(value);
    } else if (zend_string_equals_literal(name, "content-length")) {
      add_assoc_str(server, "CONTENT_LENGTH", zend_string_copy(value));
    } else if (zend_string_equals_literal(name, "cookie")) {
      *cookie = zend_string_copy(value);
    }
    if (zend_string_equals_literal(name, "host")) {
      const char *c = memchr(ZSTR_VAL(value), ':', ZSTR_LEN(value));
      size_t n = c == NULL ? ZSTR_LEN(value) : (size_t)(c - ZSTR_VAL(value));
      add_assoc_stringl(server, "SERVER_NAME", ZSTR_VAL(value), n);
      if (c != NULL) {
        add_assoc_stringl(server, "SERVER_PORT", c + 1, ZSTR_LEN(value) - n - 1);
      }
    }
    zend_string *key = server_key(name);
    zval v;
    ZVAL_STR(&v, value);
    zend_symtable_update(s, key, &v);
    zend_string_release(key);
  }
  ZEND_HASH_FOREACH_END();
}

void php_shmlink_http_globals(zend_object *req) {
  php_shmlink_http_request_done(); /* a previous call's files, if any */
  bool spooled = php_shmlink_http_body_spooled(req);
  if (!php_shmlink_http_input_set(req)) {
    return; /* thrown: the spooled body cannot be read */
  }
  if (base_server == NULL) {
    /* Made now, so that no script compiled later makes them again over
     * ours (auto_globals_jit). */
    zend_is_auto_global_str(ZEND_STRL("_SERVER"));
    zend_is_auto_global_str(ZEND_STRL("_REQUEST"));
    zval *current = &PG(http_globals)[TRACK_VARS_SERVER];
    base_server =
        Z_TYPE_P(current) == IS_ARRAY ? zend_array_dup(Z_ARRVAL_P(current)) : zend_new_array(0);
  }
  zval server, get, post, cookies, request;
  ZVAL_ARR(&server, zend_array_dup(base_server));
  /* Values from the worker's start that a request replaces. */
  zend_hash_str_del(Z_ARRVAL(server), ZEND_STRL("argv"));
  zend_hash_str_del(Z_ARRVAL(server), ZEND_STRL("argc"));
  zend_string *cookie = NULL, *content_type = NULL;
  fill_server(req, &server, &cookie, &content_type);

  zend_string *query = prop_str(req, HTTP_REQ_QUERY);
  parse_query(ZSTR_VAL(query), ZSTR_LEN(query), &get);
  zend_string *body = prop_str(req, HTTP_REQ_BODY);
  zval_ptr_dtor(&PG(http_globals)[TRACK_VARS_FILES]);
  array_init(&PG(http_globals)[TRACK_VARS_FILES]);
  if (content_type != NULL &&
      strncasecmp(ZSTR_VAL(content_type), "application/x-www-form-urlencoded",
                  sizeof "application/x-www-form-urlencoded" - 1) == 0) {
    if (spooled) {
      /* A form this large is read whole, as PHP-FPM reads it. */
      php_stream *in = SG(request_info).request_body;
      php_stream_rewind(in);
      zend_string *all = php_stream_copy_to_mem(in, PHP_STREAM_COPY_ALL, 0);
      parse_query(all ? ZSTR_VAL(all) : "", all ? ZSTR_LEN(all) : 0, &post);
      if (all) {
        zend_string_release(all);
      }
    } else {
      parse_query(ZSTR_VAL(body), ZSTR_LEN(body), &post);
    }
  } else if (content_type != NULL && strncasecmp(ZSTR_VAL(content_type), MULTIPART_CONTENT_TYPE,
                                                 sizeof MULTIPART_CONTENT_TYPE - 1) == 0) {
    /* Into PHP's own $_POST: with ext/filter loaded, its input filter
     * files each field there itself rather than in the handler's array. */
    zval *track = &PG(http_globals)[TRACK_VARS_POST];
    zval_ptr_dtor(track);
    array_init(track);
    zval_ptr_dtor(&PG(http_globals)[TRACK_VARS_FILES]);
    ZVAL_UNDEF(&PG(http_globals)[TRACK_VARS_FILES]);
    php_stream *in = SG(request_info).request_body;
    php_stream_rewind(in);
    php_stream_statbuf st;
    zend_long length = spooled && php_stream_stat(in, &st) == 0 ? (zend_long)st.sb.st_size
                                                                : (zend_long)ZSTR_LEN(body);
    parse_multipart(content_type, in, length, track);
    php_stream_rewind(in);
    ZVAL_COPY(&post, track);
    if (Z_TYPE(PG(http_globals)[TRACK_VARS_FILES]) != IS_ARRAY) {
      array_init(&PG(http_globals)[TRACK_VARS_FILES]);
    }
  } else {
    array_init(&post);
  }
  array_init(&cookies);
  if (cookie != NULL) {
    parse_cookies(cookie, &cookies);
  }
  /* $_REQUEST: $_GET, then $_POST over it (request_order "GP"). */
  ZVAL_ARR(&request, zend_array_dup(Z_ARRVAL(get)));
  php_array_merge(Z_ARRVAL(request), Z_ARRVAL(post));

  set_global(ZEND_STRL("_SERVER"), TRACK_VARS_SERVER, &server);
  set_global(ZEND_STRL("_GET"), TRACK_VARS_GET, &get);
  set_global(ZEND_STRL("_POST"), TRACK_VARS_POST, &post);
  set_global(ZEND_STRL("_COOKIE"), TRACK_VARS_COOKIE, &cookies);
  set_global(ZEND_STRL("_REQUEST"), -1, &request);
  set_global(ZEND_STRL("_FILES"), -1, &PG(http_globals)[TRACK_VARS_FILES]);
  zval_ptr_dtor(&server);
  zval_ptr_dtor(&get);
  zval_ptr_dtor(&post);
  zval_ptr_dtor(&cookies);
  zval_ptr_dtor(&request);
  if (cookie != NULL) {
    zend_string_release(cookie);
  }
  if (content_type != NULL) {
    zend_string_release(content_type);
  }
}
