/* Small C helpers for the Go binding: each does one library call and, when
 * it fails, copies the thread-local detail (shmlink_last_error and
 * shmlink_last_remote_code) in the same cgo call, on the same OS thread. */
#ifndef SHMLINK_GO_SHIM_H
#define SHMLINK_GO_SHIM_H

#include <stdint.h>
#include <stdlib.h>

#include "shmlink.h"

/* A failure's detail: msg is malloc'd (free it), NULL on success. */
typedef struct gs_err {
  uint32_t remote_code;
  char *msg;
} gs_err;

/* Per-client scratch in C memory: the reused response buffer, the last
 * call id and the failure detail. Guarded by the Go client's mutex. */
typedef struct gs_client {
  shmlink_client *client;
  shmlink_buffer buf;
  uint64_t id;
  uint64_t sent; /* gs_send_wait: the id of the call it sent, 0 if none */
  gs_err err;
} gs_client;

gs_client *gs_client_new(void);
void gs_client_free(gs_client *c);
void gs_err_clear(gs_err *e);

int32_t gs_connect(gs_client *c, const char *address, const shmlink_client_options *o);
int32_t gs_call(gs_client *c, const uint8_t *req, size_t len, uint64_t timeout_us);
int32_t gs_send(gs_client *c, const uint8_t *req, size_t len);
int32_t gs_recv(gs_client *c, uint64_t timeout_us);
int32_t gs_notify(gs_client *c, const uint8_t *msg, size_t len);
/* Sends, then takes the answer if one begins to arrive within wait_ns
 * (shmlink_client_wait_readable: the library's wait, which never cuts an
 * answer off), received whole with shmlink_client_try_receive. c->sent:
 * the id sent, 0 when the send failed; c->id: the answer's.
 * SHMLINK_E_WOULD_BLOCK (no detail copied): none yet, the client's
 * descriptor armed. */
int32_t gs_send_wait(gs_client *c, const uint8_t *req, size_t len, uint64_t wait_ns);
/* shmlink_client_try_receive; SHMLINK_E_WOULD_BLOCK copies no detail. */
int32_t gs_try_receive(gs_client *c);
int32_t gs_fd(gs_client *c, int *fd);
int32_t gs_close(gs_client *c);

int32_t gs_bind(const char *const *addrs, size_t n, const shmlink_server_options *o,
                shmlink_server **out, gs_err *e);
int32_t gs_serve(shmlink_server *s, uintptr_t handle, gs_err *e);
int32_t gs_start(shmlink_server *s, uintptr_t handle, gs_err *e);
int32_t gs_wait(shmlink_server *s, gs_err *e);

/* A worker of `shmlink pool` and its scratch, like gs_client. */
typedef struct gs_worker {
  shmlink_worker *worker;
  const uint8_t *req;
  size_t req_len;
  int stopped;
  gs_err err;
} gs_worker;

gs_worker *gs_worker_new(void);
void gs_worker_free(gs_worker *w);
int32_t gs_worker_connect(gs_worker *w, const char *address, const shmlink_client_options *o);
int32_t gs_worker_accept(gs_worker *w);
int32_t gs_worker_respond(gs_worker *w, const uint8_t *resp, size_t len);
int32_t gs_worker_fail(gs_worker *w, uint32_t code, const char *msg);

#endif
