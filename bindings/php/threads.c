/* shmlink PHP extension: waiting for the library's threads at shutdown.
 *
 * A freed library server has joined its threads (the segment preparer and
 * the session threads). A server whose shmlink_server_serve still runs on
 * another thread when it is freed, or one leaked by a fatal error, has not:
 * its threads run code of this module. At MSHUTDOWN, in a process that made
 * a Shmlink\Server, the module waits a bounded time for them to be gone, so
 * the process does not tear itself down (exit handlers, unloading modules)
 * under threads still running library code. They are
 * recognised by their names, "shmlink-*", in /proc/self/task. The module
 * is also linked with -z nodelete (config.m4), so it stays mapped whatever
 * they do. */

#include <dirent.h>
#include <stdio.h>
#include <unistd.h>

#include "php_shmlink.h"

#define WAIT_STEP_US 2000
#define WAIT_MAX_US 1000000

static bool servers_made;
static long servers_live; /* bound and not freed yet */

void php_shmlink_threads_server_bound(void) {
  servers_made = true;
  __atomic_fetch_add(&servers_live, 1, __ATOMIC_RELAXED);
}

void php_shmlink_threads_server_freed(void) {
  __atomic_fetch_sub(&servers_live, 1, __ATOMIC_RELAXED);
}

/* Whether a thread named "shmlink-..." is still in this process. */
static bool library_threads_running(void) {
  DIR *dir = opendir("/proc/self/task");
  if (dir == NULL) {
    return false;
  }
  bool found = false;
  struct dirent *e;
  while (!found && (e = readdir(dir)) != NULL) {
    if (e->d_name[0] == '.') {
      continue;
    }
    char path[64], name[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%.20s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
      continue; /* the thread ended meanwhile */
    }
    found = fgets(name, sizeof name, f) != NULL && strncmp(name, "shmlink-", 8) == 0;
    fclose(f);
  }
  closedir(dir);
  return found;
}

void php_shmlink_threads_shutdown(void) {
  /* A server still live here was leaked by a fatal error (PHP frees no
   * objects then): its threads keep running, waiting would be in vain. */
  if (!servers_made || __atomic_load_n(&servers_live, __ATOMIC_RELAXED) != 0) {
    return;
  }
  for (long waited = 0; waited < WAIT_MAX_US && library_threads_running(); waited += WAIT_STEP_US) {
    usleep(WAIT_STEP_US);
  }
}
