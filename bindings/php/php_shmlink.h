/* shmlink PHP extension: what the source files share. */

#ifndef PHP_SHMLINK_H
#define PHP_SHMLINK_H

#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdbool.h>
#include <stdint.h>

#include "php.h"
/* After php.h, which they need first. */
#include "Zend/zend_exceptions.h"
#include "ext/spl/spl_exceptions.h"
#include "ext/standard/info.h"
#include "shmlink.h"

#define PHP_SHMLINK_VERSION "0.1.0"

extern zend_module_entry shmlink_module_entry;
#define phpext_shmlink_ptr &shmlink_module_entry

/* Class entries (registered in shmlink.c). */
extern zend_class_entry *php_shmlink_client_ce;
extern zend_class_entry *php_shmlink_server_ce;
extern zend_class_entry *php_shmlink_worker_ce;
extern zend_class_entry *php_shmlink_exception_ce;
extern zend_class_entry *php_shmlink_connect_exception_ce;
extern zend_class_entry *php_shmlink_timeout_exception_ce;
extern zend_class_entry *php_shmlink_closed_exception_ce;
extern zend_class_entry *php_shmlink_remote_exception_ce;
extern zend_class_entry *php_shmlink_protocol_exception_ce;

/* Process counters, Shmlink\stats() (shmlink.c). Updated atomically. */
typedef struct {
  uint64_t connects;
  uint64_t persistent_reuses;
  uint64_t reconnects;
  uint64_t calls;
  uint64_t errors;
} php_shmlink_counters;
extern php_shmlink_counters php_shmlink_stats;
#define PHP_SHMLINK_COUNT(field) __atomic_fetch_add(&php_shmlink_stats.field, 1, __ATOMIC_RELAXED)

/* errors.c: throws the exception for a failed library call, with
 * shmlink_last_error() as its message. */
void php_shmlink_throw(shmlink_status status);
/* errors.c: php_shmlink_throw for the answer to call id (received with
 * Client::receive() or tryReceive()): a RemoteException carries the id as
 * its callId. */
void php_shmlink_throw_answer(shmlink_status status, uint64_t id);
/* errors.c: throws Shmlink\ClosedException with a formatted message. */
void php_shmlink_throw_closed(const char *format, ...) ZEND_ATTRIBUTE_FORMAT(printf, 1, 2);

/* options.c: argument checks shared by Client and Server. arg is the
 * argument number used in ValueError/TypeError messages. */
bool php_shmlink_address_ok(const zend_string *address);
bool php_shmlink_wait_option(uint32_t arg, const char *name, zval *value, uint32_t *out);
bool php_shmlink_size_option(uint32_t arg, const char *name, zval *value, zend_long min,
                             zend_long max, uint64_t *out);
bool php_shmlink_timeout_arg(uint32_t arg, double seconds, uint64_t *out_us);
bool php_shmlink_client_options(uint32_t arg, HashTable *options, shmlink_client_options *out,
                                bool *persistent);

/* A client session: the library's client and its reusable response buffer,
 * shared by the Client objects that use it (persistent.c). */
typedef struct php_shmlink_session {
  shmlink_client *client;
  shmlink_buffer buffer;
  uint32_t refs;       /* Client objects using it */
  bool persistent;     /* kept in EG(persistent_list) while in_table */
  bool in_table;       /* still the list's session for its key */
  bool closed;         /* closed with Client::close() */
  uint64_t generation; /* fork generation of the process that connected it */
  zend_string *key;    /* persistent list key (persistent memory), or NULL */
} php_shmlink_session;

/* persistent.c */
php_shmlink_session *php_shmlink_session_open(const char *address,
                                              const shmlink_client_options *options,
                                              bool persistent, shmlink_status *status);
void php_shmlink_session_release(php_shmlink_session *session);
void php_shmlink_session_close(php_shmlink_session *session);
/* Whether this process opened the session (not inherited through fork()). */
bool php_shmlink_session_owned(const php_shmlink_session *session);
uint64_t php_shmlink_persistent_count(void);
/* Registers the persistent resource type (MINIT); the engine frees the list. */
void php_shmlink_persistent_startup(int module_number);

/* threads.c: a process that made a server waits for the library's
 * remaining threads at MSHUTDOWN. */
void php_shmlink_threads_server_bound(void);
void php_shmlink_threads_server_freed(void);
void php_shmlink_threads_shutdown(void);

/* client.c and server.c: object handlers, set up in MINIT. */
void php_shmlink_client_minit(zend_class_entry *ce);
void php_shmlink_server_minit(zend_class_entry *ce);
void php_shmlink_worker_minit(zend_class_entry *ce);

#endif /* PHP_SHMLINK_H */
