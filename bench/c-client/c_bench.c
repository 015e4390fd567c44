/* The C client of `shmlink bench --c-client`: measures round trips through
 * the C library exactly as the Rust client is measured (one timed call after
 * another, a monotonic clock read around each).
 *
 *   shmlink-c-bench ADDRESS SIZE ITERATIONS [WARMUP]
 *
 * Prints one JSON line: size, calls, p50_ns, p99_ns, p999_ns, mean_ns and the
 * process CPU time over the timed calls (cpu_ns). Fails on any error or on a
 * response that is not a prefix of its request. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <shmlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static uint64_t ns(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

/* Checks a call's outcome: status, then the response against its request. */
static int check(shmlink_status st, const uint8_t *req, size_t size, const shmlink_buffer *resp) {
  if (st != SHMLINK_OK) {
    fprintf(stderr, "call failed (%s): %s\n", shmlink_error_string(st), shmlink_last_error());
    return -1;
  }
  if (resp->len > size || (resp->len > 0 && memcmp(resp->data, req, resp->len) != 0)) {
    fprintf(stderr, "wrong response of %zu bytes to %zu\n", resp->len, size);
    return -1;
  }
  return 0;
}

static int one_call(shmlink_client *c, const uint8_t *req, size_t size, shmlink_buffer *resp) {
  return check(shmlink_client_call(c, req, size, resp), req, size, resp);
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: %s ADDRESS SIZE ITERATIONS [WARMUP]\n", argv[0]);
    return 2;
  }
  size_t size = strtoull(argv[2], NULL, 10);
  size_t iters = strtoull(argv[3], NULL, 10);
  size_t warmup = argc > 4 ? strtoull(argv[4], NULL, 10) : iters / 20;
  if (iters == 0) {
    fprintf(stderr, "ITERATIONS must be at least 1\n");
    return 2;
  }
  shmlink_client *c = NULL;
  if (shmlink_client_connect(argv[1], NULL, &c) != SHMLINK_OK) {
    fprintf(stderr, "cannot connect to %s: %s\n", argv[1], shmlink_last_error());
    return 1;
  }
  uint8_t *req = malloc(size ? size : 1);
  uint64_t *lat = malloc(iters * sizeof *lat);
  if (req == NULL || lat == NULL) return 1;
  for (size_t i = 0; i < size; i++) req[i] = (uint8_t)(i * 7 + 1);
  shmlink_buffer resp = SHMLINK_BUFFER_INIT;
  for (size_t i = 0; i < warmup; i++)
    if (one_call(c, req, size, &resp) != 0) return 1;

  uint64_t cpu0 = ns(CLOCK_PROCESS_CPUTIME_ID), total = 0;
  for (size_t i = 0; i < iters; i++) {
    /* Only the call is timed; the response is checked after the clock read,
     * as the Rust client's are. */
    uint64_t t0 = ns(CLOCK_MONOTONIC);
    shmlink_status st = shmlink_client_call(c, req, size, &resp);
    lat[i] = ns(CLOCK_MONOTONIC) - t0;
    total += lat[i];
    if (check(st, req, size, &resp) != 0) return 1;
  }
  uint64_t cpu = ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
  qsort(lat, iters, sizeof *lat, cmp);
#define AT(q) lat[(size_t)((double)(iters - 1) * (q))]
  printf(
      "{\"size\":%zu,\"calls\":%zu,\"p50_ns\":%llu,\"p99_ns\":%llu,\"p999_ns\":%llu,"
      "\"mean_ns\":%.1f,\"cpu_ns\":%llu}\n",
      size, iters, (unsigned long long)AT(0.5), (unsigned long long)AT(0.99),
      (unsigned long long)AT(0.999), (double)total / (double)iters, (unsigned long long)cpu);
  shmlink_buffer_free(&resp);
  shmlink_client_free(c);
  free(req);
  free(lat);
  return 0;
}
