/*
 * What a fill leaves for the next call, with the least code possible: two
 * processes spinning on one shared word each way (no library, no frames),
 * the caller on CPU 0 and the answerer on CPU 1, as `shmlink bench` pins
 * them. Before each call the caller writes SIZE bytes:
 *   own    - into memory of its own; the answerer only answers;
 *   shared - into a shared buffer whose first and last 4 KiB the answerer
 *            reads before answering (what `--paths loan` asks of the server).
 * The round trip is timed from the caller's store to the answer it sees.
 * Prints one markdown row per size and mode: p50 and min of CALLS calls.
 *
 *   cold [CALLS] [SIZE_MIB ...]      e.g. cold 15 0.0625 1 16 256 1024
 */
#define _GNU_SOURCE
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../common/timing.h"

enum { PAGE = 4096, MAX_CALLS = 1000 };

struct control {
  _Atomic unsigned long request;
  char pad1[56];
  _Atomic unsigned long answer;
  char pad2[56];
  unsigned long sum;
};

static void *shared_map(size_t len) {
  int fd = memfd_create("cold", 0);
  if (fd < 0 || ftruncate(fd, (off_t)len) != 0) {
    perror("memfd");
    exit(1);
  }
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    perror("mmap");
    exit(1);
  }
  close(fd);
  return p;
}

/* The answerer: spins for a request, reads the buffer's ends when told to,
 * answers. Yields every 10 us as shmlink's busy wait does. */
static void answer(struct control *c, const unsigned char *buf, size_t len, int read_ends) {
  pin(1);
  unsigned long seen = 0;
  for (;;) {
    unsigned long r;
    double next_yield = now_us() + 10;
    while ((r = atomic_load_explicit(&c->request, memory_order_acquire)) == seen) {
      __builtin_ia32_pause();
      if (now_us() > next_yield) {
        next_yield = now_us() + 10;
        sched_yield();
      }
    }
    seen = r;
    unsigned long sum = 0;
    if (read_ends) {
      for (size_t i = 0; i < PAGE; i += 8) {
        sum += *(const volatile unsigned long *)(buf + i);
        sum += *(const volatile unsigned long *)(buf + len - PAGE + i);
      }
    }
    c->sum = sum;
    atomic_store_explicit(&c->answer, r, memory_order_release);
  }
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void row(size_t len, int shared, int calls) {
  struct control *c = shared_map(sizeof *c);
  unsigned char *buf = shared_map(len);
  unsigned char *own = malloc(len);
  if (own == NULL) {
    perror("malloc");
    exit(1);
  }
  memset(own, 1, len);
  memset(buf, 1, len);
  pid_t child = fork();
  if (child < 0) {
    perror("fork");
    exit(1);
  }
  if (child == 0) {
    answer(c, buf, len, shared);
  }
  pin(0);
  double took[MAX_CALLS];
  for (int i = 0; i < calls; i++) {
    memset(shared ? buf : own, i + 2, len);
    double t0 = now_us();
    atomic_store_explicit(&c->request, (unsigned long)i + 1, memory_order_release);
    while (atomic_load_explicit(&c->answer, memory_order_acquire) != (unsigned long)i + 1) {
      __builtin_ia32_pause();
    }
    took[i] = now_us() - t0;
  }
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  qsort(took, (size_t)calls, sizeof took[0], by_value);
  printf("| %8.4g MiB | %-6s | %8.2f | %8.2f |\n", (double)len / (1 << 20),
         shared ? "shared" : "own", took[calls / 2], took[0]);
  free(own);
  munmap(buf, len);
  munmap(c, sizeof *c);
}

int main(int argc, char **argv) {
  int calls = argc > 1 ? atoi(argv[1]) : 15;
  if (calls < 1 || calls > MAX_CALLS) {
    fprintf(stderr, "cold: CALLS must be 1..%d\n", MAX_CALLS);
    return 2;
  }
  printf("| fill | mode | p50 us | min us |\n|---:|---|---:|---:|\n");
  for (int a = 2; a < argc; a++) {
    size_t len = (size_t)(atof(argv[a]) * (1 << 20));
    if (len < 2 * PAGE) {
      fprintf(stderr, "cold: a size must be at least 8 KiB\n");
      return 2;
    }
    row(len, 0, calls);
    row(len, 1, calls);
  }
  return 0;
}
