/* shmlink PHP extension: the $addresses and $options of Shmlink\Server. */

#include "server_options.h"

#define SERVER_OPTIONS \
  "allowed_uids, allowed_gids, socket_mode, socket_group, max_sessions, wait, max_message_size"

#define ADDRESS_FORMS "\"shm:PATH\", \"unix:PATH\" or \"tcp:HOST:PORT\""

bool php_shmlink_server_addresses(uint32_t arg, HashTable *list, zend_string *one,
                                  php_shmlink_server_args *out) {
  if (one != NULL) {
    if (zend_str_has_nul_byte(one)) {
      zend_argument_value_error(arg, "must not contain any null bytes");
      return false;
    }
    if (!php_shmlink_address_ok(one)) {
      zend_argument_value_error(arg, "must be " ADDRESS_FORMS ", \"%s\" given", ZSTR_VAL(one));
      return false;
    }
    out->addresses = emalloc(sizeof(char *));
    out->addresses[0] = ZSTR_VAL(one);
    out->address_count = 1;
    return true;
  }
  uint32_t n = zend_hash_num_elements(list);
  if (n == 0) {
    zend_argument_value_error(arg, "must not be empty");
    return false;
  }
  out->addresses = safe_emalloc(n, sizeof(char *), 0);
  out->address_count = 0;
  zval *value;
  ZEND_HASH_FOREACH_VAL(list, value) {
    ZVAL_DEREF(value);
    if (Z_TYPE_P(value) != IS_STRING) {
      zend_argument_type_error(arg, "must contain only strings, %s given",
                               zend_zval_type_name(value));
      return false;
    }
    zend_string *a = Z_STR_P(value);
    if (zend_str_has_nul_byte(a) || !php_shmlink_address_ok(a)) {
      zend_argument_value_error(arg, "must contain only " ADDRESS_FORMS ", \"%s\" given",
                                ZSTR_VAL(a));
      return false;
    }
    out->addresses[out->address_count++] = ZSTR_VAL(a);
  }
  ZEND_HASH_FOREACH_END();
  return true;
}

/* An array of ids (0 to 4294967295) as a uint32_t array. */
static bool id_list(uint32_t arg, const char *name, zval *value, uint32_t **out, size_t *len) {
  if (Z_TYPE_P(value) != IS_ARRAY) {
    zend_argument_type_error(arg, "option \"%s\" must be of type array, %s given", name,
                             zend_zval_type_name(value));
    return false;
  }
  HashTable *ht = Z_ARRVAL_P(value);
  *out = safe_emalloc(zend_hash_num_elements(ht) + 1, sizeof(uint32_t), 0);
  *len = 0;
  zval *id;
  ZEND_HASH_FOREACH_VAL(ht, id) {
    ZVAL_DEREF(id);
    if (Z_TYPE_P(id) != IS_LONG) {
      zend_argument_type_error(arg, "option \"%s\" must contain only int, %s given", name,
                               zend_zval_type_name(id));
      return false;
    }
    if (Z_LVAL_P(id) < 0 || Z_LVAL_P(id) > UINT32_MAX) {
      zend_argument_value_error(
          arg, "option \"%s\" must contain ids from 0 to 4294967295, " ZEND_LONG_FMT " given", name,
          Z_LVAL_P(id));
      return false;
    }
    (*out)[(*len)++] = (uint32_t)Z_LVAL_P(id);
  }
  ZEND_HASH_FOREACH_END();
  return true;
}

static bool u32_option(uint32_t arg, const char *name, zval *value, zend_long min, zend_long max,
                       uint32_t *out) {
  uint64_t v;
  if (!php_shmlink_size_option(arg, name, value, min, max, &v)) {
    return false;
  }
  *out = (uint32_t)v;
  return true;
}

bool php_shmlink_server_options(uint32_t arg, HashTable *options, php_shmlink_server_args *out) {
  shmlink_server_options *o = &out->options;
  shmlink_server_options_init(o);
  if (options == NULL) {
    return true;
  }
  zend_string *key;
  zend_ulong index;
  zval *value;
  ZEND_HASH_FOREACH_KEY_VAL(options, index, key, value) {
    ZVAL_DEREF(value);
    bool ok;
    if (key == NULL) {
      zend_argument_value_error(arg, "contains unknown option " ZEND_ULONG_FMT " (known: %s)",
                                index, SERVER_OPTIONS);
      return false;
    } else if (zend_string_equals_literal(key, "allowed_uids")) {
      ok = id_list(arg, "allowed_uids", value, &out->uids, &o->allowed_uids_len);
      o->allowed_uids = out->uids;
    } else if (zend_string_equals_literal(key, "allowed_gids")) {
      ok = id_list(arg, "allowed_gids", value, &out->gids, &o->allowed_gids_len);
      o->allowed_gids = out->gids;
    } else if (zend_string_equals_literal(key, "socket_mode")) {
      ok = u32_option(arg, "socket_mode", value, 1, 0777, &o->socket_mode);
    } else if (zend_string_equals_literal(key, "socket_group")) {
      ok = u32_option(arg, "socket_group", value, 0, UINT32_MAX, &o->socket_group);
      o->socket_group_set = 1;
    } else if (zend_string_equals_literal(key, "max_sessions")) {
      ok = u32_option(arg, "max_sessions", value, 1, UINT32_MAX, &o->max_sessions);
    } else if (zend_string_equals_literal(key, "wait")) {
      ok = php_shmlink_wait_option(arg, "wait", value, &o->wait);
    } else if (zend_string_equals_literal(key, "max_message_size")) {
      ok = php_shmlink_size_option(arg, "max_message_size", value, SHMLINK_MIN_MESSAGE_SIZE,
                                   SHMLINK_MAX_MESSAGE_SIZE, &o->max_message_size);
    } else {
      zend_argument_value_error(arg, "contains unknown option \"%s\" (known: %s)", ZSTR_VAL(key),
                                SERVER_OPTIONS);
      return false;
    }
    if (!ok) {
      return false;
    }
  }
  ZEND_HASH_FOREACH_END();
  return true;
}

void php_shmlink_server_args_free(php_shmlink_server_args *args) {
  if (args->addresses != NULL) {
    efree(args->addresses);
  }
  if (args->uids != NULL) {
    efree(args->uids);
  }
  if (args->gids != NULL) {
    efree(args->gids);
  }
}
