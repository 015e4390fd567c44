/* shmlink PHP extension: the start and the end of every HTTP call a
 * worker takes, in one place for the parts that keep per-call state. */

#include "http.h"

void php_shmlink_http_call_begin(shmlink_worker *w) {
  php_shmlink_http_headers_begin();
  php_shmlink_stream_request(w);
}

void php_shmlink_http_call_end(void) {
  php_shmlink_stream_request(NULL);
  php_shmlink_http_request_done();
}
