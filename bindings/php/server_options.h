/* shmlink PHP extension: the arguments of Shmlink\Server::__construct(). */

#ifndef PHP_SHMLINK_SERVER_OPTIONS_H
#define PHP_SHMLINK_SERVER_OPTIONS_H

#include "php_shmlink.h"

/* What shmlink_server_bind needs; the arrays are emalloc'd and point into
 * the PHP arguments, so they live for the constructor call only. */
typedef struct {
  const char **addresses;
  size_t address_count;
  shmlink_server_options options;
  uint32_t *uids;
  uint32_t *gids;
} php_shmlink_server_args;

/* $addresses: either one (a string) or list (an array). */
bool php_shmlink_server_addresses(uint32_t arg, HashTable *list, zend_string *one,
                                  php_shmlink_server_args *out);
bool php_shmlink_server_options(uint32_t arg, HashTable *options, php_shmlink_server_args *out);
void php_shmlink_server_args_free(php_shmlink_server_args *args);

#endif /* PHP_SHMLINK_SERVER_OPTIONS_H */
