/* shmlink PHP extension: the hand-off between the library's session threads
 * and the PHP thread in Shmlink\Server::serve().
 *
 * The library calls php_shmlink_queue_handler on its session threads. It
 * never touches PHP: it queues a job (the request's pointer and length, both
 * valid while it waits) and blocks on the job's condition variable until
 * the PHP thread has answered it (copied bytes, or an error code and
 * message), then writes the answer into the library's response on its own
 * thread, as the library requires. A watcher thread waits for the library's
 * server to finish (shmlink_server_wait) and marks the queue done. */

#ifndef PHP_SHMLINK_QUEUE_H
#define PHP_SHMLINK_QUEUE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shmlink.h"

/* Error code of requests answered while serve() is being left abnormally
 * (an exception from a signal handler, exit(), a fatal error). */
#define PHP_SHMLINK_E_SHUTDOWN 0xFFFF0100u

typedef struct php_shmlink_job {
  struct php_shmlink_job *next;
  const uint8_t *request; /* owned by the waiting session thread */
  size_t request_len;
  pthread_cond_t answered;
  bool done;
  uint32_t code; /* 0: data is the response; else data is the error message */
  char *data;    /* malloc'd, NUL-terminated; NULL for a default message */
  size_t len;
} php_shmlink_job;

typedef struct php_shmlink_queue php_shmlink_queue;

php_shmlink_queue *php_shmlink_queue_new(void);
/* The shmlink_handler; user_data is the queue. */
uint32_t php_shmlink_queue_handler(void *user_data, const uint8_t *request, size_t request_len,
                                   shmlink_response *response);
/* Starts the watcher thread of server. false when it cannot be started. */
bool php_shmlink_queue_watch(php_shmlink_queue *q, shmlink_server *server);
/* The next job, waiting up to timeout_ms for one; NULL when none came.
 * *finished becomes true once the server has finished and nothing is left. */
php_shmlink_job *php_shmlink_queue_next(php_shmlink_queue *q, long timeout_ms, bool *finished);
/* Answers job (copies data); the job must not be used afterwards. */
void php_shmlink_queue_answer(php_shmlink_queue *q, php_shmlink_job *job, uint32_t code,
                              const char *data, size_t len);
/* From now on every job, queued or new, is answered with PHP_SHMLINK_E_SHUTDOWN. */
void php_shmlink_queue_close(php_shmlink_queue *q);
/* Waits for the watcher thread; returns the error of shmlink_server_wait
 * (malloc'd message in *error, or NULL) and frees the queue. */
shmlink_status php_shmlink_queue_finish(php_shmlink_queue *q, char **error);

#endif /* PHP_SHMLINK_QUEUE_H */
