# Runs the sanitizer canary (-DCANARY=path) and passes only if it failed with
# an AddressSanitizer heap-buffer-overflow report, i.e. the sanitizer works.
if(NOT CANARY)
  message(FATAL_ERROR "usage: cmake -DCANARY=path -P check_canary.cmake")
endif()
execute_process(
  COMMAND "${CANARY}"
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
if(rc EQUAL 0)
  message(FATAL_ERROR "the canary exited 0: the sanitizer missed a heap out-of-bounds read\n${out}${err}")
endif()
if(NOT err MATCHES "AddressSanitizer")
  message(FATAL_ERROR "the canary failed (${rc}) without an AddressSanitizer report:\n${err}")
endif()
if(NOT err MATCHES "heap-buffer-overflow")
  message(FATAL_ERROR "AddressSanitizer reported something else than the canary's read:\n${err}")
endif()
message(STATUS "AddressSanitizer caught the canary (exit ${rc})")
