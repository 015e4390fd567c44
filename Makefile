# The C library: build, header, install (with pkg-config and CMake packages),
# examples. Everything Rust is built by cargo; this file only assembles.
#
#   make                      build libshmlink (shared + static)
#   make install PREFIX=DIR   install lib, headers, shmlink.pc, CMake package (DESTDIR honoured)
#   make uninstall PREFIX=DIR
#   make header               regenerate bindings/c/include/shmlink.h with cbindgen
#   make check-header         fail if regenerating the header would change it
#   make examples PREFIX=DIR  build the examples and bench/c-client against an installed DIR
#   make clean                remove what this Makefile made (not cargo's target/)

PREFIX ?= /usr/local
DESTDIR ?=
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)
CARGO ?= cargo
CBINDGEN ?= cbindgen
STRIP ?= strip
RELEASE := target/release
HEADER := bindings/c/include/shmlink.h
HPP := bindings/cpp/include/shmlink.hpp
LIBDIR := $(DESTDIR)$(PREFIX)/lib
INCDIR := $(DESTDIR)$(PREFIX)/include
CMAKEDIR := $(LIBDIR)/cmake/shmlink
EXAMPLES := examples/cpp-daemon examples/c-client examples/c-loop examples/cpp-client bench/c-client
JOBS ?= 2

.PHONY: all lib install uninstall header check-header examples clean

all: lib

lib:
	$(CARGO) build --release -p shmlink-capi

# cbindgen, installed with cargo when it is not on PATH.
FIND_CBINDGEN = cb=$$(command -v $(CBINDGEN) || true); \
	if [ -z "$$cb" ]; then \
	  echo "cbindgen not found: $(CARGO) install cbindgen --locked" >&2; \
	  $(CARGO) install cbindgen --locked || exit 1; \
	  cb=$$(command -v cbindgen || echo "$${CARGO_HOME:-$$HOME/.cargo}/bin/cbindgen"); \
	fi

header:
	@$(FIND_CBINDGEN); \
	echo "$$cb --config bindings/c/cbindgen.toml --crate shmlink-capi --output $(HEADER)"; \
	"$$cb" --quiet --config bindings/c/cbindgen.toml --crate shmlink-capi --output $(HEADER)

check-header:
	@$(FIND_CBINDGEN); \
	tmp=$$(mktemp); \
	"$$cb" --quiet --config bindings/c/cbindgen.toml --crate shmlink-capi --output $$tmp || { rm -f $$tmp; exit 1; }; \
	if ! diff -u $(HEADER) $$tmp; then rm -f $$tmp; \
	  echo "check-header: $(HEADER) differs from what cbindgen generates: run make header" >&2; exit 1; fi; \
	rm -f $$tmp; echo "check-header: $(HEADER) is up to date"

install: lib
	install -d $(LIBDIR) $(INCDIR) $(LIBDIR)/pkgconfig $(CMAKEDIR)
	install -m 0755 $(RELEASE)/libshmlink_c.so $(LIBDIR)/libshmlink.so.$(VERSION)
	ln -sf libshmlink.so.$(VERSION) $(LIBDIR)/libshmlink.so.2
	ln -sf libshmlink.so.2 $(LIBDIR)/libshmlink.so
	install -m 0644 $(RELEASE)/libshmlink_c.a $(LIBDIR)/libshmlink.a
	$(STRIP) --strip-debug $(LIBDIR)/libshmlink.so.$(VERSION) $(LIBDIR)/libshmlink.a
	install -m 0644 $(HEADER) $(INCDIR)/shmlink.h
	install -m 0644 $(HPP) $(INCDIR)/shmlink.hpp
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' bindings/c/shmlink.pc.in > $(LIBDIR)/pkgconfig/shmlink.pc
	sed -e 's|@VERSION@|$(VERSION)|' bindings/c/cmake/shmlinkConfig.cmake.in > $(CMAKEDIR)/shmlinkConfig.cmake
	sed -e 's|@VERSION@|$(VERSION)|' bindings/c/cmake/shmlinkConfigVersion.cmake.in > $(CMAKEDIR)/shmlinkConfigVersion.cmake
	@echo "installed shmlink $(VERSION) under $(DESTDIR)$(PREFIX)"

uninstall:
	rm -f $(LIBDIR)/libshmlink.so $(LIBDIR)/libshmlink.so.1 $(LIBDIR)/libshmlink.so.2 $(LIBDIR)/libshmlink.so.$(VERSION) $(LIBDIR)/libshmlink.a
	rm -f $(INCDIR)/shmlink.h $(INCDIR)/shmlink.hpp $(LIBDIR)/pkgconfig/shmlink.pc
	rm -rf $(CMAKEDIR)

# Each example is a user's project: CMake finds the installed package.
examples:
	@for ex in $(EXAMPLES); do \
	  if [ -f $$ex/CMakeLists.txt ]; then \
	    name=$$(echo $$ex | sed -e "s|^examples/||" -e "s|/|-|g"); \
	    cmake -S $$ex -B target/examples/$$name -DCMAKE_PREFIX_PATH=$(abspath $(PREFIX)) -DCMAKE_BUILD_TYPE=Release >/dev/null && \
	    cmake --build target/examples/$$name -j $(JOBS) >/dev/null || exit 1; \
	    echo "built $$ex in target/examples/$$name"; \
	  fi; \
	done

# What make made: example builds and the staging install of ci/ (cargo's own
# output stays; ci/c-tests.sh's target/ctest is its own).
clean:
	rm -rf target/examples target/stage
