/* shmlink PHP extension: client sessions, and the persistent ones kept in
 * the engine's persistent-resource list (EG(persistent_list)), as database
 * extensions keep their persistent connections.
 *
 * A persistent session belongs to the PHP process (to the thread, under
 * ZTS: the list is per thread), not to a request: the list maps
 * "normalised options + address" to one session, which every Client object
 * created with the same key shares. On reuse a session that died is replaced
 * once by a fresh connect (before anything is sent: a call is never
 * retried), and one with pipelined calls in flight is left to the object
 * using it while the new Client gets a fresh session, which then becomes the
 * list's. The engine frees the list's sessions at shutdown through the
 * resource type's destructor; a session still used by an object when it
 * leaves the list is freed by its last object.
 *
 * A forked child inherits the list and the objects but not the right to use
 * their sessions: it never reuses, calls or closes them (closing would say
 * goodbye on the parent's session); freeing one there releases only the
 * child's copy (shmlink_client_forget). */

#include <pthread.h>

#include "php_shmlink.h"

/* The persistent resource type of sessions. */
static int le_session;

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

/* The list's destructor: the session leaves the list (taken out, or the
 * engine shutting down); freed now unless an object still uses it. */
static void session_list_dtor(zend_resource *res) {
  php_shmlink_session *s = res->ptr;
  res->ptr = NULL;
  if (s == NULL) {
    return;
  }
  s->in_table = false;
  if (s->refs == 0) {
    session_free(s);
  }
}

/* Takes s out of the list; the destructor frees it when no object uses it. */
static void drop(php_shmlink_session *s) {
  if (s->in_table) {
    zend_hash_del(&EG(persistent_list), s->key);
  } else if (s->refs == 0) {
    session_free(s);
  }
}

/* The list key: every option after normalisation, then the address. */
static zend_string *make_key(const char *address, const shmlink_client_options *o) {
  char head[176];
  int n = snprintf(
      head, sizeof head, "shmlink t=%" PRIu64 " w=%u s=%u r=%" PRIu64 " m=%" PRIu64 " q=%u ",
      o->timeout_us, o->wait, o->spin_us, o->ring_size, o->max_message_size, o->shm_required);
  size_t alen = strlen(address);
  zend_string *key = zend_string_alloc((size_t)n + alen, 1);
  memcpy(ZSTR_VAL(key), head, (size_t)n);
  memcpy(ZSTR_VAL(key) + n, address, alen + 1);
  return key;
}

/* The list's session for key, or NULL. */
static php_shmlink_session *find(zend_string *key) {
  zend_resource *res = zend_hash_find_ptr(&EG(persistent_list), key);
  if (res == NULL || res->type != le_session) {
    return NULL;
  }
  return res->ptr;
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
  bool reconnect = false;
  php_shmlink_session *s = find(key);
  if (s != NULL) {
    if (!php_shmlink_session_owned(s) || shmlink_client_in_flight(s->client) > 0) {
      drop(s); /* inherited through fork, or pipelining in another object */
    } else if (shmlink_client_is_connected(s->client)) {
      s->refs++;
      PHP_SHMLINK_COUNT(persistent_reuses);
      zend_string_release_ex(key, 1);
      return s;
    } else {
      drop(s); /* the server went away or the session broke: replace it once */
      reconnect = true;
    }
  }
  shmlink_client *client = connect_one(address, options, status);
  if (client == NULL) {
    zend_string_release_ex(key, 1);
    return NULL;
  }
  if (reconnect) {
    PHP_SHMLINK_COUNT(reconnects);
  }
  s = session_new(client, true);
  s->key = key;
  s->in_table = true;
  zend_register_persistent_resource_ex(key, s, le_session);
  return s;
}

void php_shmlink_session_release(php_shmlink_session *s) {
  s->refs--;
  if (s->refs == 0) {
    if (!s->in_table) {
      session_free(s);
    } else if (php_shmlink_session_owned(s) && shmlink_client_in_flight(s->client) > 0) {
      /* Responses nobody can receive any more: the session cannot be reused. */
      drop(s);
    }
  }
}

void php_shmlink_session_close(php_shmlink_session *s) {
  /* Out of the list first; refs > 0 keeps it alive until the release below. */
  if (s->in_table) {
    zend_hash_del(&EG(persistent_list), s->key);
  }
  if (php_shmlink_session_owned(s)) {
    shmlink_client_close(s->client);
  }
  s->closed = true;
  php_shmlink_session_release(s);
}

uint64_t php_shmlink_persistent_count(void) {
  uint64_t n = 0;
  zend_resource *res;
  ZEND_HASH_FOREACH_PTR(&EG(persistent_list), res) {
    if (res->type == le_session && res->ptr != NULL) {
      n += php_shmlink_session_owned(res->ptr);
    }
  }
  ZEND_HASH_FOREACH_END();
  return n;
}

void php_shmlink_persistent_startup(int module_number) {
  le_session =
      zend_register_list_destructors_ex(NULL, session_list_dtor, "shmlink session", module_number);
  pthread_atfork(NULL, NULL, forked_child);
}
