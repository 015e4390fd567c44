#include "shim.h"

#include <string.h>

#include "_cgo_export.h"

static int32_t gs_fail(int32_t st, gs_err *e) {
  if (st != SHMLINK_OK && e != NULL) {
    e->remote_code = shmlink_last_remote_code();
    free(e->msg);
    e->msg = strdup(shmlink_last_error());
  }
  return st;
}

void gs_err_clear(gs_err *e) {
  free(e->msg);
  e->msg = NULL;
  e->remote_code = 0;
}

gs_client *gs_client_new(void) { return calloc(1, sizeof(gs_client)); }

void gs_client_free(gs_client *c) {
  if (c == NULL) return;
  shmlink_client_free(c->client);
  shmlink_buffer_free(&c->buf);
  gs_err_clear(&c->err);
  free(c);
}

int32_t gs_connect(gs_client *c, const char *address, const shmlink_client_options *o) {
  return gs_fail(shmlink_client_connect(address, o, &c->client), &c->err);
}

int32_t gs_call(gs_client *c, const uint8_t *req, size_t len, uint64_t timeout_us) {
  return gs_fail(shmlink_client_call_timeout(c->client, req, len, timeout_us, &c->buf), &c->err);
}

int32_t gs_send(gs_client *c, const uint8_t *req, size_t len) {
  return gs_fail(shmlink_client_send(c->client, req, len, &c->id), &c->err);
}

int32_t gs_recv(gs_client *c, uint64_t timeout_us) {
  c->id = 0;
  return gs_fail(shmlink_client_recv(c->client, timeout_us, &c->id, &c->buf), &c->err);
}

int32_t gs_send_wait(gs_client *c, const uint8_t *req, size_t len, uint64_t wait_ns) {
  c->sent = 0;
  int32_t st = shmlink_client_send(c->client, req, len, &c->sent);
  if (st != SHMLINK_OK) {
    c->sent = 0;
    return gs_fail(st, &c->err);
  }
  /* The library's own wait, for at most wait_ns: it spins as a blocking
   * call does (its CPU hint published, nothing armed), so a quick answer
   * costs the server no wake-up. Polling try_receive instead armed the
   * descriptor at every look, and the server rang it for every answer. */
  uint64_t wait_us = wait_ns / 1000;
  if (wait_us > 0) {
    int ready = 0;
    st = shmlink_client_wait_readable(c->client, wait_us, &ready);
    if (st != SHMLINK_OK) return gs_fail(st, &c->err);
  }
  c->id = 0;
  st = shmlink_client_try_receive(c->client, &c->id, &c->buf);
  if (st == SHMLINK_E_WOULD_BLOCK) return st; /* armed: the descriptor will say */
  return gs_fail(st, &c->err);
}

int32_t gs_try_receive(gs_client *c) {
  c->id = 0;
  int32_t st = shmlink_client_try_receive(c->client, &c->id, &c->buf);
  if (st == SHMLINK_E_WOULD_BLOCK) return st;
  return gs_fail(st, &c->err);
}

int32_t gs_fd(gs_client *c, int *fd) { return gs_fail(shmlink_client_fd(c->client, fd), &c->err); }

int32_t gs_notify(gs_client *c, const uint8_t *msg, size_t len) {
  return gs_fail(shmlink_client_notify(c->client, msg, len), &c->err);
}

int32_t gs_close(gs_client *c) { return gs_fail(shmlink_client_close(c->client), &c->err); }

int32_t gs_bind(const char *const *addrs, size_t n, const shmlink_server_options *o,
                shmlink_server **out, gs_err *e) {
  return gs_fail(shmlink_server_bind(addrs, n, o, out), e);
}

/* The shmlink_handler every Go server uses: user_data is a cgo.Handle. */
static uint32_t gs_trampoline(void *user_data, const uint8_t *req, size_t len,
                              shmlink_response *resp) {
  return goShmlinkHandle((uintptr_t)user_data, (uint8_t *)req, len, resp);
}

int32_t gs_serve(shmlink_server *s, uintptr_t handle, gs_err *e) {
  return gs_fail(shmlink_server_serve(s, gs_trampoline, (void *)handle), e);
}

int32_t gs_start(shmlink_server *s, uintptr_t handle, gs_err *e) {
  return gs_fail(shmlink_server_start(s, gs_trampoline, (void *)handle), e);
}

int32_t gs_wait(shmlink_server *s, gs_err *e) { return gs_fail(shmlink_server_wait(s), e); }

gs_worker *gs_worker_new(void) { return calloc(1, sizeof(gs_worker)); }

void gs_worker_free(gs_worker *w) {
  if (w == NULL) return;
  shmlink_worker_free(w->worker);
  gs_err_clear(&w->err);
  free(w);
}

int32_t gs_worker_connect(gs_worker *w, const char *address, const shmlink_client_options *o) {
  return gs_fail(shmlink_worker_connect(address, o, &w->worker), &w->err);
}

int32_t gs_worker_accept(gs_worker *w) {
  w->req = NULL;
  w->req_len = 0;
  w->stopped = 0;
  return gs_fail(shmlink_worker_accept(w->worker, &w->req, &w->req_len, &w->stopped), &w->err);
}

int32_t gs_worker_respond(gs_worker *w, const uint8_t *resp, size_t len) {
  return gs_fail(shmlink_worker_respond(w->worker, resp, len), &w->err);
}

int32_t gs_worker_fail(gs_worker *w, uint32_t code, const char *msg) {
  return gs_fail(shmlink_worker_fail(w->worker, code, msg), &w->err);
}
