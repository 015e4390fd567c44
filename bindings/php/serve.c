/* shmlink PHP extension: Shmlink\Server::serve(), the PHP thread's side of
 * the hand-off in queue.h.
 *
 * The library serves on its own threads (shmlink_server_start); this thread
 * takes their requests from the queue one at a time, runs the PHP handler,
 * and answers. While idle it wakes every IDLE_MS to run pending VM
 * interrupts, which is how pcntl_async_signals() handlers (SIGTERM ->
 * $server->stop()) run while serve() waits. It returns once the library's
 * server has finished (after stop(): requests already received are still
 * answered) and the queue is empty. Left any other way (an exception from a
 * signal handler, exit() in the handler, a fatal error), it still stops the
 * server, answers whatever is pending with an error, and waits for the
 * library's threads before going on. */

#include "queue.h"
#include "server.h"

#define IDLE_MS 50

/* Code of error responses for a handler that returned no string, or threw
 * an exception whose code is not in 1..4294967295. */
#define HANDLER_ERROR 1

static void answer_error(php_shmlink_queue *q, php_shmlink_job *job, uint32_t code,
                         zend_string *message) {
  php_shmlink_queue_answer(q, job, code, ZSTR_VAL(message), ZSTR_LEN(message));
}

/* Answers job with the exception's code and message. */
static void answer_exception(php_shmlink_queue *q, php_shmlink_job *job, zend_object *ex) {
  zend_class_entry *base = zend_get_exception_base(ex);
  zval rv_message, rv_code;
  zval *message = zend_read_property_ex(base, ex, ZSTR_KNOWN(ZEND_STR_MESSAGE), 1, &rv_message);
  zval *code = zend_read_property_ex(base, ex, ZSTR_KNOWN(ZEND_STR_CODE), 1, &rv_code);
  ZVAL_DEREF(message);
  ZVAL_DEREF(code);
  uint32_t c = HANDLER_ERROR;
  if (Z_TYPE_P(code) == IS_LONG && Z_LVAL_P(code) >= 1 && Z_LVAL_P(code) <= UINT32_MAX) {
    c = (uint32_t)Z_LVAL_P(code);
  }
  zend_string *text = Z_TYPE_P(message) == IS_STRING ? zend_string_copy(Z_STR_P(message))
                                                     : zend_string_copy(ex->ce->name);
  answer_error(q, job, c, text);
  zend_string_release(text);
}

/* Runs the handler on one request and answers it. false when serve() must
 * be left at once: exit() was called (the exit "exception" must go on). */
static bool run_job(php_shmlink_queue *q, php_shmlink_job *job, zend_fcall_info *fci,
                    zend_fcall_info_cache *fcc) {
  zval arg, retval;
  ZVAL_STRINGL_FAST(&arg, (const char *)job->request, job->request_len);
  ZVAL_UNDEF(&retval);
  fci->params = &arg;
  fci->param_count = 1;
  fci->retval = &retval;
  zend_result called = zend_call_function(fci, fcc);
  zval_ptr_dtor(&arg);
  bool go_on = true;
  if (EG(exception) != NULL) {
    zend_object *ex = EG(exception);
    if (zend_is_unwind_exit(ex) || zend_is_graceful_exit(ex)) {
      php_shmlink_queue_answer(q, job, PHP_SHMLINK_E_SHUTDOWN, "the PHP server exited",
                               strlen("the PHP server exited"));
      go_on = false;
    } else {
      answer_exception(q, job, ex);
      zend_clear_exception();
    }
  } else if (called == FAILURE || Z_TYPE(retval) == IS_UNDEF) {
    const char *m = "the handler could not be called";
    php_shmlink_queue_answer(q, job, HANDLER_ERROR, m, strlen(m));
  } else if (Z_TYPE(retval) == IS_STRING) {
    php_shmlink_queue_answer(q, job, 0, Z_STRVAL(retval), Z_STRLEN(retval));
  } else {
    zend_string *m =
        zend_strpprintf(0, "handler returned %s, expected string", zend_zval_type_name(&retval));
    answer_error(q, job, HANDLER_ERROR, m);
    zend_string_release(m);
  }
  zval_ptr_dtor(&retval);
  return go_on;
}

/* Runs pending VM interrupts (signal handlers of pcntl_async_signals). false
 * when one threw. */
static bool run_interrupts(void) {
  if (!zend_atomic_bool_load_ex(&EG(vm_interrupt))) {
    return true;
  }
  zend_atomic_bool_store_ex(&EG(vm_interrupt), false);
  if (zend_atomic_bool_load_ex(&EG(timed_out))) {
    zend_timeout(); /* max_execution_time: a fatal error (bails out) */
  }
  if (zend_interrupt_function != NULL) {
    zend_interrupt_function(EG(current_execute_data));
  }
  return EG(exception) == NULL;
}

/* Leaves serve() abnormally: nothing is handled any more, everything
 * pending is answered with an error, the server is stopped. */
static void abandon(php_shmlink_queue *q, shmlink_server *server) {
  php_shmlink_queue_close(q);
  shmlink_server_stop(server);
}

/* Waits for the library's server and frees the queue; throws its error. */
static void finish(php_shmlink_queue *q, bool throw_error) {
  char *error = NULL;
  shmlink_status status = php_shmlink_queue_finish(q, &error);
  if (status != SHMLINK_OK && throw_error && EG(exception) == NULL) {
    zend_throw_exception(php_shmlink_exception_ce, error != NULL ? error : "", 0);
  }
  free(error);
}

static void serve_loop(php_shmlink_queue *q, shmlink_server *server, zend_fcall_info *fci,
                       zend_fcall_info_cache *fcc) {
  for (;;) {
    bool finished = false;
    php_shmlink_job *job = php_shmlink_queue_next(q, IDLE_MS, &finished);
    if ((job != NULL && !run_job(q, job, fci, fcc)) || !run_interrupts()) {
      abandon(q, server);
      return;
    }
    if (finished) {
      return;
    }
  }
}

ZEND_METHOD(Shmlink_Server, serve) {
  zend_fcall_info fci;
  zend_fcall_info_cache fcc;
  ZEND_PARSE_PARAMETERS_START(1, 1)
  Z_PARAM_FUNC(fci, fcc)
  ZEND_PARSE_PARAMETERS_END();

  php_shmlink_server *s = php_shmlink_server_of(Z_OBJ_P(ZEND_THIS));
  shmlink_server *server = php_shmlink_server_bound(s);
  if (server == NULL) {
    RETURN_THROWS();
  }
  if (s->served) {
    zend_throw_exception(php_shmlink_exception_ce,
                         s->serving ? "Shmlink\\Server::serve() is already running"
                                    : "Shmlink\\Server::serve() was already called on this server",
                         0);
    RETURN_THROWS();
  }
  s->served = true;
  php_shmlink_queue *q = php_shmlink_queue_new();
  if (q == NULL) {
    zend_throw_exception(php_shmlink_exception_ce, "out of memory", 0);
    RETURN_THROWS();
  }
  shmlink_status status = shmlink_server_start(server, php_shmlink_queue_handler, q);
  if (status != SHMLINK_OK) {
    php_shmlink_throw(status); /* the library did not take q */
    char *unused;
    php_shmlink_queue_finish(q, &unused);
    RETURN_THROWS();
  }
  if (!php_shmlink_queue_watch(q, server)) {
    /* No watcher: stop and wait here instead, with nothing handled. */
    php_shmlink_queue_close(q);
    shmlink_server_stop(server);
    shmlink_server_wait(server);
    char *unused;
    php_shmlink_queue_finish(q, &unused);
    zend_throw_exception(php_shmlink_exception_ce, "cannot start the server's watcher thread", 0);
    RETURN_THROWS();
  }
  s->serving = true;
  zend_try { serve_loop(q, server, &fci, &fcc); }
  zend_catch {
    /* A fatal error in the handler or a signal handler: let nothing wait. */
    abandon(q, server);
    finish(q, false);
    s->serving = false;
    zend_bailout();
  }
  zend_end_try();
  finish(q, true);
  s->serving = false;
}
