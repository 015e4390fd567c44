/* shmlink PHP extension: the session-thread side of Server::serve() (see
 * queue.h). Plain C and pthreads only: nothing here may touch PHP, since
 * the handler runs on the library's threads. */

#include "queue.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

struct php_shmlink_queue {
  pthread_mutex_t lock;
  pthread_cond_t changed; /* a job was queued, or the server finished */
  php_shmlink_job *head, *tail;
  php_shmlink_job *current; /* taken by the PHP thread, not answered yet */
  bool closing;             /* answer everything at once with PHP_SHMLINK_E_SHUTDOWN */
  bool finished;            /* shmlink_server_wait returned */
  bool watching;            /* the watcher thread was started */
  pthread_t watcher;
  shmlink_server *server;
  shmlink_status status; /* of shmlink_server_wait */
  char *error;           /* its message */
};

static const char shutdown_message[] = "the PHP server stopped before answering this request";

php_shmlink_queue *php_shmlink_queue_new(void) {
  php_shmlink_queue *q = calloc(1, sizeof *q);
  if (q == NULL) {
    return NULL;
  }
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_mutex_init(&q->lock, NULL);
  pthread_cond_init(&q->changed, &attr);
  pthread_condattr_destroy(&attr);
  return q;
}

/* Marks job answered and wakes its session thread (lock held). */
static void finish_job(php_shmlink_job *job, uint32_t code, char *data, size_t len) {
  job->code = code;
  job->data = data;
  job->len = len;
  job->done = true;
  pthread_cond_signal(&job->answered);
}

uint32_t php_shmlink_queue_handler(void *user_data, const uint8_t *request, size_t request_len,
                                   shmlink_response *response) {
  php_shmlink_queue *q = user_data;
  php_shmlink_job job = {.request = request, .request_len = request_len};
  pthread_cond_init(&job.answered, NULL);

  pthread_mutex_lock(&q->lock);
  if (q->closing) {
    finish_job(&job, PHP_SHMLINK_E_SHUTDOWN, NULL, 0);
  } else {
    if (q->tail != NULL) {
      q->tail->next = &job;
    } else {
      q->head = &job;
    }
    q->tail = &job;
    pthread_cond_signal(&q->changed);
  }
  while (!job.done) {
    pthread_cond_wait(&job.answered, &q->lock);
  }
  pthread_mutex_unlock(&q->lock);
  pthread_cond_destroy(&job.answered);

  uint32_t code = job.code;
  if (code == 0 && shmlink_response_write(response, (const uint8_t *)job.data, job.len) != 0) {
    code = PHP_SHMLINK_E_SHUTDOWN; /* no memory for the response */
  }
  if (code != 0) {
    shmlink_response_set_error_message(response, job.data != NULL ? job.data : shutdown_message);
  }
  free(job.data);
  return code;
}

static void *watch(void *arg) {
  php_shmlink_queue *q = arg;
  shmlink_status status = shmlink_server_wait(q->server);
  char *error = status == SHMLINK_OK ? NULL : strdup(shmlink_last_error());
  pthread_mutex_lock(&q->lock);
  q->status = status;
  q->error = error;
  q->finished = true;
  pthread_cond_broadcast(&q->changed);
  pthread_mutex_unlock(&q->lock);
  return NULL;
}

bool php_shmlink_queue_watch(php_shmlink_queue *q, shmlink_server *server) {
  q->server = server;
  q->watching = pthread_create(&q->watcher, NULL, watch, q) == 0;
  return q->watching;
}

php_shmlink_job *php_shmlink_queue_next(php_shmlink_queue *q, long timeout_ms, bool *finished) {
  pthread_mutex_lock(&q->lock);
  if (q->head == NULL && !q->finished) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += timeout_ms / 1000;
    until.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&q->changed, &q->lock, &until);
  }
  php_shmlink_job *job = q->head;
  if (job != NULL) {
    q->head = job->next;
    if (q->head == NULL) {
      q->tail = NULL;
    }
    job->next = NULL;
    q->current = job;
  }
  *finished = job == NULL && q->finished;
  pthread_mutex_unlock(&q->lock);
  return job;
}

void php_shmlink_queue_answer(php_shmlink_queue *q, php_shmlink_job *job, uint32_t code,
                              const char *data, size_t len) {
  char *copy = malloc(len + 1);
  if (copy == NULL) {
    code = PHP_SHMLINK_E_SHUTDOWN;
    len = 0;
  } else {
    if (len > 0) {
      memcpy(copy, data, len);
    }
    copy[len] = '\0';
  }
  pthread_mutex_lock(&q->lock);
  if (q->current == job) {
    q->current = NULL;
  }
  finish_job(job, code, copy, len);
  pthread_mutex_unlock(&q->lock);
}

void php_shmlink_queue_close(php_shmlink_queue *q) {
  pthread_mutex_lock(&q->lock);
  q->closing = true;
  if (q->current != NULL) { /* the handler was left by a fatal error */
    finish_job(q->current, PHP_SHMLINK_E_SHUTDOWN, NULL, 0);
    q->current = NULL;
  }
  while (q->head != NULL) {
    php_shmlink_job *job = q->head;
    q->head = job->next;
    finish_job(job, PHP_SHMLINK_E_SHUTDOWN, NULL, 0);
  }
  q->tail = NULL;
  pthread_mutex_unlock(&q->lock);
}

shmlink_status php_shmlink_queue_finish(php_shmlink_queue *q, char **error) {
  if (q->watching) {
    pthread_join(q->watcher, NULL);
  }
  shmlink_status status = q->status;
  *error = q->error;
  pthread_cond_destroy(&q->changed);
  pthread_mutex_destroy(&q->lock);
  free(q);
  return status;
}
