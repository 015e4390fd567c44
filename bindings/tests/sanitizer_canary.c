/* Proves that the sanitizer build really catches memory errors: one
 * deliberate heap out-of-bounds read, which AddressSanitizer must report
 * (the test passes only if this program fails with an AddressSanitizer
 * report). Linked with shmlink so that the check covers the same process
 * setup as the tests. */
#include <shmlink.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  printf("shmlink %s\n", shmlink_version());
  char *block = malloc(16);
  if (block == NULL) return 2;
  memset(block, 'x', 16);
  /* volatile: the compiler can neither see nor drop the bad read. */
  volatile size_t end = 16;
  volatile char *p = block;
  char past_the_end = p[end]; /* heap-buffer-overflow: the canary */
  printf("read %d past the end\n", past_the_end);
  free(block);
  return 0;
}
