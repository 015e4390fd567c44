/*
 * What the standalone C probes under bench/ share: a monotonic clock in
 * microseconds and pinning the calling thread to one CPU (as `shmlink
 * bench` pins its client to CPU 0 and its servers to CPU 1).
 */
#ifndef SHMLINK_BENCH_TIMING_H
#define SHMLINK_BENCH_TIMING_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static inline void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof set, &set) != 0) {
    perror("sched_setaffinity");
    exit(1);
  }
}

#endif
