/* shmlink PHP extension: the Shmlink\Server object, shared by server.c and serve.c. */

#ifndef PHP_SHMLINK_SERVER_H
#define PHP_SHMLINK_SERVER_H

#include "php_shmlink.h"

typedef struct {
  shmlink_server *server; /* NULL until constructed */
  bool serving;           /* serve() is running */
  bool served;            /* serve() was called */
  zend_object std;
} php_shmlink_server;

static inline php_shmlink_server *php_shmlink_server_of(zend_object *obj) {
  return (php_shmlink_server *)((char *)obj - XtOffsetOf(php_shmlink_server, std));
}

shmlink_server *php_shmlink_server_bound(php_shmlink_server *s);

#endif /* PHP_SHMLINK_SERVER_H */
