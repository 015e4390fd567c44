/*
 * Plain against streamed (non-temporal) copies into shared memory, the
 * choice `Loan::fill_from` makes at `shmlink_arena::STREAM_FROM`. For each
 * size the source is rewritten (as a caller producing it would), then
 * copied into a memfd mapping on CPU 0 in one of two ways:
 *   plain    - memcpy (what glibc picks; it never streams on this VM);
 *   streamed - 16-byte non-temporal stores, then a store fence;
 * and a reader on CPU 1 reads every byte of the copy (a peer using the
 * whole request). Both ways alternate, ROUNDS times each. Prints one
 * markdown row per size: median µs of the copy alone and of copy + read.
 *
 *   copy [ROUNDS] [SIZE_MIB ...]      e.g. copy 25 1 4 8 12 16 64 256
 */
#define _GNU_SOURCE
#include <emmintrin.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "../common/timing.h"

enum { MAX_ROUNDS = 1000 };

static void streamed(char *dst, const char *src, size_t len) {
  size_t i = 0;
  for (; i + 64 <= len; i += 64) {
    __m128i a = _mm_loadu_si128((const __m128i *)(src + i));
    __m128i b = _mm_loadu_si128((const __m128i *)(src + i + 16));
    __m128i c = _mm_loadu_si128((const __m128i *)(src + i + 32));
    __m128i d = _mm_loadu_si128((const __m128i *)(src + i + 48));
    _mm_stream_si128((__m128i *)(dst + i), a);
    _mm_stream_si128((__m128i *)(dst + i + 16), b);
    _mm_stream_si128((__m128i *)(dst + i + 32), c);
    _mm_stream_si128((__m128i *)(dst + i + 48), d);
  }
  memcpy(dst + i, src + i, len - i);
  _mm_sfence();
}

static _Atomic long go, done;
static const unsigned long *shared_words;
static size_t shared_len;
static volatile unsigned long sink;

static void *reader(void *arg) {
  (void)arg;
  pin(1);
  long seen = 0;
  for (;;) {
    long g;
    while ((g = atomic_load(&go)) == seen)
      ;
    if (g < 0) return NULL;
    seen = g;
    unsigned long acc = 0;
    for (size_t i = 0; i < shared_len / 8; i++) acc += shared_words[i];
    sink = acc;
    atomic_store(&done, seen);
  }
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return v[n / 2];
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 25;
  if (rounds < 1 || rounds > MAX_ROUNDS) {
    fprintf(stderr, "ROUNDS must be 1..%d\n", MAX_ROUNDS);
    return 2;
  }
  pin(0);
  pthread_t t;
  if (pthread_create(&t, NULL, reader, NULL) != 0) {
    perror("pthread_create");
    return 1;
  }
  printf(
      "| size MiB | plain copy µs | streamed copy µs | plain copy + read µs | "
      "streamed copy + read µs | plain ÷ streamed (copy + read) |\n");
  printf("| ---: | ---: | ---: | ---: | ---: | ---: |\n");
  long seq = 0;
  for (int a = 2; a < argc; a++) {
    size_t len = (size_t)(atof(argv[a]) * 1048576.0);
    char *src = malloc(len);
    int fd = memfd_create("copy", 0);
    if (src == NULL || fd < 0 || ftruncate(fd, (off_t)len) != 0) {
      perror("allocating");
      return 1;
    }
    char *dst = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (dst == MAP_FAILED) {
      perror("mmap");
      return 1;
    }
    memset(dst, 0, len);
    shared_words = (const unsigned long *)dst;
    shared_len = len;
    static double copy[2][MAX_ROUNDS], whole[2][MAX_ROUNDS];
    for (int r = 0; r < rounds; r++) {
      for (int way = 0; way < 2; way++) {
        memset(src, r + way, len);
        double t0 = now_us();
        if (way == 0)
          memcpy(dst, src, len);
        else
          streamed(dst, src, len);
        double t1 = now_us();
        atomic_store(&go, ++seq);
        while (atomic_load(&done) != seq)
          ;
        copy[way][r] = t1 - t0;
        whole[way][r] = now_us() - t0;
      }
    }
    double pc = median(copy[0], rounds), sc = median(copy[1], rounds);
    double pw = median(whole[0], rounds), sw = median(whole[1], rounds);
    printf("| %g | %.0f | %.0f | %.0f | %.0f | %.2f |\n", atof(argv[a]), pc, sc, pw, sw, pw / sw);
    fflush(stdout);
    munmap(dst, len);
    close(fd);
    free(src);
  }
  atomic_store(&go, -1);
  pthread_join(t, NULL);
  return 0;
}
