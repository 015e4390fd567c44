dnl shmlink PHP extension. The Rust library is linked statically into
dnl shmlink.so with its symbols hidden, so the module needs nothing at run time
dnl but libc and libgcc_s.
dnl
dnl   phpize && ./configure [--with-shmlink[=DIR]] && make
dnl
dnl DIR holds include/shmlink.h and lib/libshmlink.a (what `make install
dnl PREFIX=DIR` installs). Without DIR, a release tarball's vendor/ (what
dnl `make -C bindings/php dist` puts there), else the source tree's header
dnl (bindings/c/include) and cargo's build (target/release/libshmlink_c.a,
dnl from `cargo build --release -p shmlink-capi`) are used.

PHP_ARG_WITH([shmlink],
  [for shmlink support],
  [AS_HELP_STRING([[--with-shmlink[=DIR]]],
    [Include shmlink support. DIR holds include/shmlink.h and lib/libshmlink.a
     (default: the source tree's bindings/c/include and target/release)])],
  [yes])

if test "$PHP_SHMLINK" != "no"; then
  if test "$PHP_SHMLINK" = "yes" && test -r "$abs_srcdir/vendor/lib/libshmlink.a"; then
    dnl A release tarball (make dist): the library travels with the sources.
    SHMLINK_INCDIR="$abs_srcdir/vendor/include"
    SHMLINK_ARCHIVE="$abs_srcdir/vendor/lib/libshmlink.a"
  elif test "$PHP_SHMLINK" = "yes"; then
    shmlink_root=`cd "$abs_srcdir/../.." && pwd`
    SHMLINK_INCDIR="$shmlink_root/bindings/c/include"
    SHMLINK_ARCHIVE="$shmlink_root/target/release/libshmlink_c.a"
  else
    SHMLINK_INCDIR="$PHP_SHMLINK/include"
    SHMLINK_ARCHIVE="$PHP_SHMLINK/lib/libshmlink.a"
  fi

  AC_MSG_CHECKING([for shmlink.h])
  if test -r "$SHMLINK_INCDIR/shmlink.h"; then
    AC_MSG_RESULT([$SHMLINK_INCDIR])
  else
    AC_MSG_RESULT([no])
    AC_MSG_ERROR([shmlink.h not found in $SHMLINK_INCDIR])
  fi
  AC_MSG_CHECKING([for the shmlink static library])
  if test -r "$SHMLINK_ARCHIVE"; then
    AC_MSG_RESULT([$SHMLINK_ARCHIVE])
  else
    AC_MSG_RESULT([no])
    AC_MSG_ERROR([$SHMLINK_ARCHIVE not found (build it with: cargo build --release -p shmlink-capi)])
  fi

  PHP_ADD_INCLUDE([$SHMLINK_INCDIR])
  dnl The archive and the native libraries it needs (what rustc prints with
  dnl --print native-static-libs) go to the linker as one -Wl group, so
  dnl libtool keeps their order and does not warn about a static archive in
  dnl a module; --exclude-libs keeps the archive's (Rust) symbols out of the
  dnl module's dynamic symbol table: it exports get_module only. -z nodelete
  dnl keeps the module mapped after dlclose(): the library's detached threads
  dnl (segment preparer, idle session threads) may still be running its code
  dnl when PHP unloads extensions at shutdown.
  SHMLINK_SHARED_LIBADD="-Wl,$SHMLINK_ARCHIVE,--exclude-libs,ALL,-z,nodelete,-lgcc_s,-lutil,-lrt,-lpthread,-lm,-ldl"
  PHP_SUBST(SHMLINK_SHARED_LIBADD)

  PHP_NEW_EXTENSION(shmlink,
    [shmlink.c errors.c options.c persistent.c client.c server.c server_options.c serve.c queue.c threads.c worker.c http.c http_globals.c http_headers.c http_stream.c http_body.c http_call.c],
    $ext_shared, , [-fvisibility=hidden -DZEND_ENABLE_STATIC_TSRMLS_CACHE=1])
fi
