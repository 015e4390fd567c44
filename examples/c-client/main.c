/* A plain C client: N calls of 2048 bytes, each response checked, calls/s.
 *
 *   shmlink-c-client ADDRESS [N]       e.g. shmlink-c-client shm:/tmp/d.sock 100000
 *
 * Works against the example daemon or `shmlink echo`, whose response is the
 * first len/8 bytes of the request. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c11 */
#include <shmlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s ADDRESS [N]\n", argv[0]);
    return 2;
  }
  long n = argc > 2 ? atol(argv[2]) : 10000;

  shmlink_client_options options;
  shmlink_client_options_init(&options);
  options.timeout_us = 2 * 1000 * 1000; /* 2 s per call */

  shmlink_client *client = NULL;
  if (shmlink_client_connect(argv[1], &options, &client) != SHMLINK_OK) {
    fprintf(stderr, "cannot connect: %s\n", shmlink_last_error());
    return 1;
  }

  uint8_t request[2048];
  shmlink_buffer response = SHMLINK_BUFFER_INIT; /* reused by every call */
  int status = 0;
  double t0 = now();
  for (long i = 0; i < n; i++) {
    memset(request, 'a' + (int)(i % 26), sizeof request);
    shmlink_status st = shmlink_client_call(client, request, sizeof request, &response);
    if (st != SHMLINK_OK) {
      fprintf(stderr, "call %ld failed (%s): %s\n", i, shmlink_error_string(st),
              shmlink_last_error());
      status = 1;
      break;
    }
    if (response.len != sizeof request / 8 || memcmp(response.data, request, response.len) != 0) {
      fprintf(stderr, "call %ld: wrong response of %zu bytes\n", i, response.len);
      status = 1;
      break;
    }
  }
  double took = now() - t0;
  if (status == 0) printf("%ld calls in %.3f s: %.0f calls/s\n", n, took, (double)n / took);

  shmlink_buffer_free(&response);
  shmlink_client_free(client);
  return status;
}
