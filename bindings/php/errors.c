/* shmlink PHP extension: library status codes to PHP exceptions. */

#include "php_shmlink.h"

/* The exception class of a failed call's status. */
static zend_class_entry *class_of(shmlink_status status) {
  switch (status) {
    case SHMLINK_E_CONNECT:
    case SHMLINK_E_REFUSED:
      return php_shmlink_connect_exception_ce;
    case SHMLINK_E_TIMEOUT:
      return php_shmlink_timeout_exception_ce;
    case SHMLINK_E_PEER_GONE:
    case SHMLINK_E_CLOSED:
      return php_shmlink_closed_exception_ce;
    case SHMLINK_E_REMOTE:
      return php_shmlink_remote_exception_ce;
    case SHMLINK_E_PROTOCOL:
      return php_shmlink_protocol_exception_ce;
    default:
      return php_shmlink_exception_ce;
  }
}

void php_shmlink_throw(shmlink_status status) {
  const char *detail = shmlink_last_error();
  if (detail == NULL || *detail == '\0') {
    detail = shmlink_error_string((int32_t)status);
  }
  zend_long code = 0;
  if (status == SHMLINK_E_REMOTE) {
    code = (zend_long)shmlink_last_remote_code();
  }
  zend_throw_exception(class_of(status), detail, code);
}

void php_shmlink_throw_answer(shmlink_status status, uint64_t id) {
  php_shmlink_throw(status);
  if (status == SHMLINK_E_REMOTE && EG(exception) != NULL) {
    zend_update_property_long(php_shmlink_remote_exception_ce, EG(exception), ZEND_STRL("callId"),
                              (zend_long)id);
  }
}

void php_shmlink_throw_closed(const char *format, ...) {
  va_list args;
  va_start(args, format);
  zend_string *message = zend_vstrpprintf(0, format, args);
  va_end(args);
  zend_throw_exception(php_shmlink_closed_exception_ce, ZSTR_VAL(message), 0);
  zend_string_release(message);
}
