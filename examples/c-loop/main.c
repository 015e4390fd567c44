/* Many sessions, many calls in flight, one thread: a C program on epoll.
 *
 *   shmlink-c-loop ADDRESS [SESSIONS [IN_FLIGHT [ROUNDS]]]
 *       opens SESSIONS clients (default 3) to ADDRESS, puts each client's
 *       readiness descriptor (shmlink_client_fd) in one epoll set, and for
 *       ROUNDS rounds (default 100) sends IN_FLIGHT calls (default 64) on
 *       every session, then takes the answers as their sessions wake
 *       (shmlink_client_try_receive until SHMLINK_E_WOULD_BLOCK), checking
 *       each against its request by call id.
 *   shmlink-c-loop ADDRESS --bench CALLS
 *       measures, at 64 bytes: one call at a time through the loop against
 *       the blocking call with the sleep wait (same server, same run), and
 *       pipelined calls through the loop (256 in flight on one session);
 *       prints one JSON line.
 *
 * The server answers each request with a prefix of it of at least 8 bytes,
 * or all of it (the example daemon; `shmlink echo --reply-ratio 1`). */
#define _POSIX_C_SOURCE 200809L
#include <shmlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#define MAX_SESSIONS 64
#define REQ_LEN 64

static uint64_t now_ns(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int fail(const char *what, shmlink_status st) {
  fprintf(stderr, "c-loop: %s failed (%s): %s\n", what, shmlink_error_string(st),
          shmlink_last_error());
  return 1;
}

/* A request that names its session and call in its first 8 bytes (the
 * session, then the call number, little-endian), the rest filled: a server
 * that answers with a prefix of at least 8 bytes (the example daemon: an
 * eighth) or the whole request is checked either way. */
static void make_request(uint8_t *req, unsigned session, unsigned long n) {
  memset(req, 'x', REQ_LEN);
  req[0] = (uint8_t)session;
  for (int i = 1; i < 8; i++, n >>= 8) req[i] = (uint8_t)(n & 0xff);
}

/* Whether `resp` answers `req`: a prefix of it, at least 8 bytes long. */
static int answers(const shmlink_buffer *resp, const uint8_t *req) {
  return resp->len >= 8 && resp->len <= REQ_LEN && memcmp(resp->data, req, resp->len) == 0;
}

/* What each session has in flight: the request number of each call id. */
struct session {
  shmlink_client *client;
  uint64_t ids[4096];
  unsigned long numbers[4096];
  size_t in_flight;
};

static int take_answers(struct session *s, unsigned index, shmlink_buffer *resp,
                        unsigned long *answered) {
  for (;;) {
    uint64_t id = 0;
    shmlink_status st = shmlink_client_try_receive(s->client, &id, resp);
    if (st == SHMLINK_E_WOULD_BLOCK || st == SHMLINK_E_NOTHING_IN_FLIGHT) return 0;
    if (st != SHMLINK_OK) return fail("try_receive", st);
    size_t k = 0;
    while (k < s->in_flight && s->ids[k] != id) k++;
    if (k == s->in_flight) {
      fprintf(stderr, "c-loop: session %u: an answer to call %llu, which is not in flight\n", index,
              (unsigned long long)id);
      return 1;
    }
    uint8_t want[REQ_LEN];
    make_request(want, index, s->numbers[k]);
    if (!answers(resp, want)) {
      fprintf(stderr, "c-loop: session %u: call %llu got another call's answer\n", index,
              (unsigned long long)id);
      return 1;
    }
    s->in_flight--;
    s->ids[k] = s->ids[s->in_flight];
    s->numbers[k] = s->numbers[s->in_flight];
    (*answered)++;
  }
}

static int run_loop(const char *address, unsigned sessions, unsigned in_flight,
                    unsigned long rounds) {
  static struct session s[MAX_SESSIONS];
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return 1;
  for (unsigned i = 0; i < sessions; i++) {
    shmlink_status st = shmlink_client_connect(address, NULL, &s[i].client);
    if (st != SHMLINK_OK) return fail("connect", st);
    int fd = -1;
    st = shmlink_client_fd(s[i].client, &fd);
    if (st != SHMLINK_OK) return fail("client_fd", st);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = i};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) return 1;
  }
  shmlink_buffer resp = SHMLINK_BUFFER_INIT;
  uint8_t req[REQ_LEN];
  unsigned long sent = 0, answered = 0;
  uint64_t t0 = now_ns(CLOCK_MONOTONIC);
  for (unsigned long r = 0; r < rounds; r++) {
    for (unsigned i = 0; i < sessions; i++) {
      for (unsigned k = 0; k < in_flight; k++) {
        make_request(req, i, sent);
        uint64_t id = 0;
        shmlink_status st = shmlink_client_send(s[i].client, req, REQ_LEN, &id);
        if (st != SHMLINK_OK) return fail("send", st);
        s[i].ids[s[i].in_flight] = id;
        s[i].numbers[s[i].in_flight++] = sent++;
      }
    }
    while (answered < sent) {
      struct epoll_event evs[MAX_SESSIONS];
      int n = epoll_wait(ep, evs, MAX_SESSIONS, 10000);
      if (n <= 0) {
        fprintf(stderr, "c-loop: no session woke in 10 s (%lu of %lu answered)\n", answered, sent);
        return 1;
      }
      for (int e = 0; e < n; e++) {
        unsigned i = evs[e].data.u32;
        if (take_answers(&s[i], i, &resp, &answered) != 0) return 1;
      }
    }
  }
  double secs = (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
  printf(
      "c-loop: %u sessions x %u in flight, %lu calls from one thread, all answered by id, "
      "%.0f calls/s\n",
      sessions, in_flight, answered, (double)answered / secs);
  for (unsigned i = 0; i < sessions; i++) shmlink_client_free(s[i].client);
  shmlink_buffer_free(&resp);
  close(ep);
  return 0;
}

static int cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* One call through the loop: send, then wait on epoll until it is answered. */
static int loop_call(shmlink_client *c, int ep, const uint8_t *req, shmlink_buffer *resp) {
  uint64_t id = 0;
  shmlink_status st = shmlink_client_send(c, req, REQ_LEN, &id);
  if (st != SHMLINK_OK) return fail("send", st);
  for (;;) {
    st = shmlink_client_try_receive(c, &id, resp);
    if (st == SHMLINK_OK) return 0;
    if (st != SHMLINK_E_WOULD_BLOCK) return fail("try_receive", st);
    struct epoll_event ev;
    if (epoll_wait(ep, &ev, 1, 10000) != 1) {
      fprintf(stderr, "c-loop: no answer in 10 s\n");
      return 1;
    }
  }
}

static int run_bench(const char *address, size_t calls) {
  shmlink_client_options sleep_opts;
  shmlink_client_options_init(&sleep_opts);
  sleep_opts.wait = SHMLINK_WAIT_SLEEP;
  shmlink_client *blocking = NULL, *looped = NULL;
  shmlink_status st = shmlink_client_connect(address, &sleep_opts, &blocking);
  if (st != SHMLINK_OK) return fail("connect", st);
  st = shmlink_client_connect(address, NULL, &looped);
  if (st != SHMLINK_OK) return fail("connect", st);
  int fd = -1;
  st = shmlink_client_fd(looped, &fd);
  if (st != SHMLINK_OK) return fail("client_fd", st);
  int ep = epoll_create1(EPOLL_CLOEXEC);
  struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 0};
  if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) return 1;
  uint64_t *lat = malloc(calls * sizeof *lat);
  if (lat == NULL) return 1;
  uint8_t req[REQ_LEN];
  make_request(req, 0, 0);
  shmlink_buffer resp = SHMLINK_BUFFER_INIT;
  uint64_t p50[2], cpu[2];
  /* The two ways alternate in rounds of 500 calls (this VM moves its
   * vCPUs every few seconds: ways measured minutes apart do not compare). */
  uint64_t *lats[2] = {lat, malloc(calls * sizeof *lat)};
  if (lats[1] == NULL) return 1;
  uint64_t cpu_sum[2] = {0, 0};
  for (size_t i = 0; i < calls / 20; i++) /* warm-up, both ways */
    if (shmlink_client_call(blocking, req, REQ_LEN, &resp) != SHMLINK_OK ||
        loop_call(looped, ep, req, &resp) != 0)
      return fail("warm-up call", SHMLINK_E_INTERNAL);
  for (size_t done = 0; done < calls;) {
    size_t n = calls - done < 500 ? calls - done : 500;
    for (int mode = 0; mode < 2; mode++) {
      uint64_t c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
      for (size_t i = done; i < done + n; i++) {
        uint64_t t0 = now_ns(CLOCK_MONOTONIC);
        int bad = mode == 0 ? shmlink_client_call(blocking, req, REQ_LEN, &resp) != SHMLINK_OK
                            : loop_call(looped, ep, req, &resp);
        lats[mode][i] = now_ns(CLOCK_MONOTONIC) - t0;
        if (bad || !answers(&resp, req)) return fail("call", SHMLINK_E_INTERNAL);
      }
      cpu_sum[mode] += now_ns(CLOCK_PROCESS_CPUTIME_ID) - c0;
    }
    done += n;
  }
  for (int mode = 0; mode < 2; mode++) {
    cpu[mode] = cpu_sum[mode] / calls;
    qsort(lats[mode], calls, sizeof *lat, cmp);
    p50[mode] = lats[mode][calls / 2];
  }
  free(lats[1]);
  /* Pipelined through the loop: 256 in flight on one session. */
  size_t pipelined = calls * 10, sent = 0, got = 0, window = 256;
  uint64_t t0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
  while (got < pipelined) {
    while (sent < pipelined && sent - got < window) {
      uint64_t id = 0;
      st = shmlink_client_send(looped, req, REQ_LEN, &id);
      if (st != SHMLINK_OK) return fail("send", st);
      sent++;
    }
    uint64_t id = 0;
    st = shmlink_client_try_receive(looped, &id, &resp);
    if (st == SHMLINK_OK) {
      got++;
      continue;
    }
    if (st != SHMLINK_E_WOULD_BLOCK) return fail("try_receive", st);
    struct epoll_event e;
    if (epoll_wait(ep, &e, 1, 10000) != 1) return fail("epoll_wait", SHMLINK_E_TIMEOUT);
  }
  double secs = (double)(now_ns(CLOCK_MONOTONIC) - t0) / 1e9;
  uint64_t pipe_cpu = (now_ns(CLOCK_PROCESS_CPUTIME_ID) - c0) / pipelined;
  printf(
      "{\"size\":64,\"calls\":%zu,\"blocking_sleep_p50_ns\":%llu,\"blocking_sleep_cpu_ns\":%llu,"
      "\"loop_p50_ns\":%llu,\"loop_cpu_ns\":%llu,\"pipelined_calls_per_s\":%.0f,"
      "\"pipelined_cpu_ns\":%llu}\n",
      calls, (unsigned long long)p50[0], (unsigned long long)cpu[0], (unsigned long long)p50[1],
      (unsigned long long)cpu[1], (double)pipelined / secs, (unsigned long long)pipe_cpu);
  shmlink_buffer_free(&resp);
  shmlink_client_free(blocking);
  shmlink_client_free(looped);
  free(lat);
  close(ep);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr,
            "usage: %s ADDRESS [SESSIONS [IN_FLIGHT [ROUNDS]]]\n"
            "       %s ADDRESS --bench CALLS\n",
            argv[0], argv[0]);
    return 2;
  }
  if (argc >= 3 && strcmp(argv[2], "--bench") == 0) {
    size_t calls = argc > 3 ? strtoull(argv[3], NULL, 10) : 20000;
    return calls > 0 ? run_bench(argv[1], calls) : 2;
  }
  unsigned sessions = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 3;
  unsigned in_flight = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 64;
  unsigned long rounds = argc > 4 ? strtoul(argv[4], NULL, 10) : 100;
  if (sessions == 0 || sessions > MAX_SESSIONS || in_flight == 0 || in_flight > 4096) {
    fprintf(stderr, "c-loop: SESSIONS 1..%d, IN_FLIGHT 1..4096\n", MAX_SESSIONS);
    return 2;
  }
  return run_loop(argv[1], sessions, in_flight, rounds);
}
