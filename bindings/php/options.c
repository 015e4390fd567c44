/* shmlink PHP extension: checks of addresses, timeouts and option arrays.
 * Bad values throw ValueError/TypeError naming the argument, before anything
 * reaches the library. */

#include <math.h>

#include "php_shmlink.h"

/* Largest timeout taken as given (about 31 years); longer ones are clamped. */
#define MAX_TIMEOUT_S 1e9

/* Well-formed UTF-8 (the library takes addresses as UTF-8 text). */
static bool utf8_ok(const unsigned char *s, size_t n) {
  static const uint32_t lead_mask[] = {0x7F, 0x1F, 0x0F, 0x07};
  static const uint32_t min[] = {0, 0x80, 0x800, 0x10000};
  for (size_t i = 0; i < n;) {
    unsigned char c = s[i];
    size_t more;
    if (c < 0x80) {
      more = 0;
    } else if ((c & 0xE0) == 0xC0) {
      more = 1;
    } else if ((c & 0xF0) == 0xE0) {
      more = 2;
    } else if ((c & 0xF8) == 0xF0) {
      more = 3;
    } else {
      return false;
    }
    if (more > n - i - 1) {
      return false;
    }
    uint32_t cp = c & lead_mask[more];
    for (size_t k = 1; k <= more; k++) {
      if ((s[i + k] & 0xC0) != 0x80) {
        return false;
      }
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if (cp < min[more] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += more + 1;
  }
  return true;
}

bool php_shmlink_address_ok(const zend_string *address) {
  const char *s = ZSTR_VAL(address);
  size_t n = ZSTR_LEN(address);
  if (!utf8_ok((const unsigned char *)s, n)) {
    return false;
  }
  if (n > 4 && memcmp(s, "shm:", 4) == 0) {
    return true;
  }
  if (n > 5 && memcmp(s, "unix:", 5) == 0) {
    return true;
  }
  if (n < 4 || memcmp(s, "tcp:", 4) != 0) {
    return false;
  }
  /* tcp:HOST:PORT, HOST non-empty (may be [v6]), PORT 0-65535 in digits. */
  const char *host = s + 4;
  const char *colon = zend_memrchr(host, ':', n - 4);
  if (colon == NULL || colon == host) {
    return false;
  }
  const char *port = colon + 1;
  size_t digits = (size_t)(s + n - port);
  if (digits == 0 || digits > 5) {
    return false;
  }
  unsigned long value = 0;
  for (size_t i = 0; i < digits; i++) {
    if (port[i] < '0' || port[i] > '9') {
      return false;
    }
    value = value * 10 + (unsigned long)(port[i] - '0');
  }
  return value <= 65535;
}

/* Seconds (finite, > 0) to whole microseconds, at least 1. */
static bool seconds_to_us(double seconds, uint64_t *out_us) {
  if (!(seconds > 0) || !isfinite(seconds)) {
    return false;
  }
  if (seconds > MAX_TIMEOUT_S) {
    seconds = MAX_TIMEOUT_S;
  }
  uint64_t us = (uint64_t)ceil(seconds * 1e6);
  *out_us = us == 0 ? 1 : us;
  return true;
}

bool php_shmlink_timeout_arg(uint32_t arg, double seconds, uint64_t *out_us) {
  if (!seconds_to_us(seconds, out_us)) {
    zend_argument_value_error(arg, "must be null or a finite number of seconds greater than 0");
    return false;
  }
  return true;
}

static void type_error(uint32_t arg, const char *name, const char *expected, zval *value) {
  zend_argument_type_error(arg, "option \"%s\" must be of type %s, %s given", name, expected,
                           zend_zval_type_name(value));
}

bool php_shmlink_wait_option(uint32_t arg, const char *name, zval *value, uint32_t *out) {
  if (Z_TYPE_P(value) != IS_STRING) {
    type_error(arg, name, "string", value);
    return false;
  }
  /* "spin" is the library default: an adaptive spin of up to 50 µs. */
  if (zend_string_equals_literal(Z_STR_P(value), "sleep")) {
    *out = SHMLINK_WAIT_SLEEP;
  } else if (zend_string_equals_literal(Z_STR_P(value), "spin")) {
    *out = SHMLINK_WAIT_DEFAULT;
  } else if (zend_string_equals_literal(Z_STR_P(value), "busy")) {
    *out = SHMLINK_WAIT_BUSY;
  } else {
    zend_argument_value_error(arg,
                              "option \"%s\" must be \"sleep\", \"spin\" or \"busy\", \"%s\" given",
                              name, Z_STRVAL_P(value));
    return false;
  }
  return true;
}

bool php_shmlink_size_option(uint32_t arg, const char *name, zval *value, zend_long min,
                             zend_long max, uint64_t *out) {
  if (Z_TYPE_P(value) != IS_LONG) {
    type_error(arg, name, "int", value);
    return false;
  }
  zend_long v = Z_LVAL_P(value);
  if (v < min || v > max) {
    zend_argument_value_error(arg,
                              "option \"%s\" must be between " ZEND_LONG_FMT " and " ZEND_LONG_FMT
                              ", " ZEND_LONG_FMT " given",
                              name, min, max, v);
    return false;
  }
  *out = (uint64_t)v;
  return true;
}

static bool timeout_option(uint32_t arg, zval *value, uint64_t *out_us) {
  double seconds;
  if (Z_TYPE_P(value) == IS_LONG) {
    seconds = (double)Z_LVAL_P(value);
  } else if (Z_TYPE_P(value) == IS_DOUBLE) {
    seconds = Z_DVAL_P(value);
  } else {
    type_error(arg, "timeout", "float", value);
    return false;
  }
  if (!seconds_to_us(seconds, out_us)) {
    zend_argument_value_error(
        arg, "option \"timeout\" must be a finite number of seconds greater than 0");
    return false;
  }
  return true;
}

static bool ring_size_option(uint32_t arg, zval *value, uint64_t *out) {
  if (!php_shmlink_size_option(arg, "ring_size", value, SHMLINK_MIN_RING_SIZE,
                               SHMLINK_MAX_RING_SIZE, out)) {
    return false;
  }
  if ((*out & (*out - 1)) != 0) {
    zend_argument_value_error(arg, "option \"ring_size\" must be a power of two, %" PRIu64 " given",
                              *out);
    return false;
  }
  return true;
}

static void unknown_option(uint32_t arg, zend_string *key, zend_ulong index, const char *known) {
  if (key != NULL) {
    zend_argument_value_error(arg, "contains unknown option \"%s\" (known: %s)", ZSTR_VAL(key),
                              known);
  } else {
    zend_argument_value_error(arg, "contains unknown option " ZEND_ULONG_FMT " (known: %s)", index,
                              known);
  }
}

#define CLIENT_OPTIONS "timeout, persistent, wait, ring_size, max_message_size, shm_required"

bool php_shmlink_client_options(uint32_t arg, HashTable *options, shmlink_client_options *out,
                                bool *persistent) {
  /* Defaults spelled out, so equal settings give equal persistent keys. */
  shmlink_client_options_init(out);
  *persistent = false;
  zend_string *key;
  zend_ulong index;
  zval *value;
  ZEND_HASH_FOREACH_KEY_VAL(options, index, key, value) {
    ZVAL_DEREF(value);
    bool ok;
    if (key == NULL) {
      ok = false;
      unknown_option(arg, key, index, CLIENT_OPTIONS);
    } else if (zend_string_equals_literal(key, "timeout")) {
      ok = timeout_option(arg, value, &out->timeout_us);
    } else if (zend_string_equals_literal(key, "persistent")) {
      ok = Z_TYPE_P(value) == IS_TRUE || Z_TYPE_P(value) == IS_FALSE;
      if (ok) {
        *persistent = Z_TYPE_P(value) == IS_TRUE;
      } else {
        type_error(arg, "persistent", "bool", value);
      }
    } else if (zend_string_equals_literal(key, "wait")) {
      ok = php_shmlink_wait_option(arg, "wait", value, &out->wait);
    } else if (zend_string_equals_literal(key, "ring_size")) {
      ok = ring_size_option(arg, value, &out->ring_size);
    } else if (zend_string_equals_literal(key, "max_message_size")) {
      ok = php_shmlink_size_option(arg, "max_message_size", value, SHMLINK_MIN_MESSAGE_SIZE,
                                   SHMLINK_MAX_MESSAGE_SIZE, &out->max_message_size);
    } else if (zend_string_equals_literal(key, "shm_required")) {
      ok = Z_TYPE_P(value) == IS_TRUE || Z_TYPE_P(value) == IS_FALSE;
      if (ok) {
        out->shm_required = Z_TYPE_P(value) == IS_TRUE ? 1 : 0;
      } else {
        type_error(arg, "shm_required", "bool", value);
      }
    } else {
      ok = false;
      unknown_option(arg, key, index, CLIENT_OPTIONS);
    }
    if (!ok) {
      return false;
    }
  }
  ZEND_HASH_FOREACH_END();
  return true;
}
