/* shmlink PHP extension: client sessions and the process-wide table of
 * persistent ones.
 *
 * A persistent session belongs to the PHP process, not to a request: the
 * table maps "normalised options + address" to one session, which every
 * Client object created with the same key shares. On reuse a session that
 * died is replaced once by a fresh connect (before anything is sent: a call
 * is never retried), and one with pipelined calls in flight is left to the
 * object using it while the new Client gets a fresh session, which then
 * becomes the table's. MSHUTDOWN frees them all.
 *
 * A forked child inherits the table and the objects but not the right to
 * use their sessions: it never reuses, calls or closes them (closing would
 * say goodbye on the parent's session); freeing one there releases only the
 * child's copy (shmlink_client_forget). */

#include <pthread.h>

#include "php_shmlink.h"

static HashTable sessions; /* key -> php_shmlink_session* */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* Incremented in every forked child (pthread_atfork): a session is this
 * process's when its generation is the current one (an integer compare per
 * call instead of a getpid() system call). */
static uint64_t generation;

static void forked_child(void) { generation++; }

bool php_shmlink_session_owned(const php_shmlink_session *s) { return s->generation == generation; }

static php_shmlink_session *session_new(shmlink_client *client, bool persistent) {
  php_shmlink_session *s = pecalloc(1, sizeof *s, 1);
  s->client = client;
  s->persistent = persistent;
  s->generation = generation;
  s->refs = 1;
  return s;
}

static void session_free(php_shmlink_session *s) {
  if (php_shmlink_session_owned(s)) {
    shmlink_client_free(s->client);
  } else {
    /* Inherited through fork(): release this process's copy only; freeing
     * it would say goodbye on the ring the parent still uses. */
    shmlink_client_forget(s->client);
  }
  shmlink_buffer_free(&s->buffer);
  if (s->key != NULL) {
    zend_string_release_ex(s->key, 1);
  }
  pefree(s, 1);
}

/* Takes s out of the table (lock held); frees it when no object uses it. */
static void drop(php_shmlink_session *s) {
  if (s->in_table) {
    zend_hash_del(&sessions, s->key);
    s->in_table = false;
  }
  if (s->refs == 0) {
    session_free(s);
  }
}

/* The table key: every option after normalisation, then the address. */
static zend_string *make_key(const char *address, const shmlink_client_options *o) {
  char head[160];
  int n = snprintf(head, sizeof head, "t=%" PRIu64 " w=%u s=%u r=%" PRIu64 " m=%" PRIu64 " ",
                   o->timeout_us, o->wait, o->spin_us, o->ring_size, o->max_message_size);
#ifdef ZTS
  /* Threads never share a session: a client serves one thread at a time. */
  n += snprintf(head + n, sizeof head - (size_t)n, "th=%lu ", (unsigned long)tsrm_thread_id());
#endif
  size_t alen = strlen(address);
  zend_string *key = zend_string_alloc((size_t)n + alen, 1);
  memcpy(ZSTR_VAL(key), head, (size_t)n);
  memcpy(ZSTR_VAL(key) + n, address, alen + 1);
  return key;
}

static shmlink_client *connect_one(const char *address, const shmlink_client_options *options,
                                   shmlink_status *status) {
  shmlink_client *client = NULL;
  *status = shmlink_client_connect(address, options, &client);
  if (*status != SHMLINK_OK) {
    return NULL;
  }
  PHP_SHMLINK_COUNT(connects);
  return client;
}

php_shmlink_session *php_shmlink_session_open(const char *address,
                                              const shmlink_client_options *options,
                                              bool persistent, shmlink_status *status) {
  if (!persistent) {
    shmlink_client *client = connect_one(address, options, status);
    return client == NULL ? NULL : session_new(client, false);
  }
  zend_string *key = make_key(address, options);
  pthread_mutex_lock(&lock);
  bool reconnect = false;
  php_shmlink_session *s = zend_hash_find_ptr(&sessions, key);
  if (s != NULL) {
    if (!php_shmlink_session_owned(s) || shmlink_client_in_flight(s->client) > 0) {
      drop(s); /* inherited through fork, or pipelining in another object */
    } else if (shmlink_client_is_connected(s->client)) {
      s->refs++;
      PHP_SHMLINK_COUNT(persistent_reuses);
      pthread_mutex_unlock(&lock);
      zend_string_release_ex(key, 1);
      return s;
    } else {
      drop(s); /* the server went away or the session broke: replace it once */
      reconnect = true;
    }
  }
  shmlink_client *client = connect_one(address, options, status);
  if (client == NULL) {
    pthread_mutex_unlock(&lock);
    zend_string_release_ex(key, 1);
    return NULL;
  }
  if (reconnect) {
    PHP_SHMLINK_COUNT(reconnects);
  }
  s = session_new(client, true);
  s->key = key;
  s->in_table = true;
  zend_hash_add_new_ptr(&sessions, key, s);
  pthread_mutex_unlock(&lock);
  return s;
}

void php_shmlink_session_release(php_shmlink_session *s) {
  pthread_mutex_lock(&lock);
  s->refs--;
  if (s->refs == 0) {
    if (!s->in_table) {
      session_free(s);
    } else if (php_shmlink_session_owned(s) && shmlink_client_in_flight(s->client) > 0) {
      /* Responses nobody can receive any more: the session cannot be reused. */
      drop(s);
    }
  }
  pthread_mutex_unlock(&lock);
}

void php_shmlink_session_close(php_shmlink_session *s) {
  pthread_mutex_lock(&lock);
  if (s->in_table) {
    zend_hash_del(&sessions, s->key);
    s->in_table = false;
  }
  if (php_shmlink_session_owned(s)) {
    shmlink_client_close(s->client);
  }
  s->closed = true;
  pthread_mutex_unlock(&lock);
  php_shmlink_session_release(s);
}

uint64_t php_shmlink_persistent_count(void) {
  uint64_t n = 0;
  pthread_mutex_lock(&lock);
  php_shmlink_session *s;
  ZEND_HASH_FOREACH_PTR(&sessions, s) { n += php_shmlink_session_owned(s); }
  ZEND_HASH_FOREACH_END();
  pthread_mutex_unlock(&lock);
  return n;
}

void php_shmlink_persistent_startup(void) {
  zend_hash_init(&sessions, 8, NULL, NULL, 1);
  pthread_atfork(NULL, NULL, forked_child);
}

void php_shmlink_persistent_shutdown(void) {
  pthread_mutex_lock(&lock);
  php_shmlink_session *s;
  ZEND_HASH_FOREACH_PTR(&sessions, s) {
    s->in_table = false;
    if (s->refs == 0) {
      session_free(s);
    }
  }
  ZEND_HASH_FOREACH_END();
  zend_hash_destroy(&sessions);
  pthread_mutex_unlock(&lock);
}
