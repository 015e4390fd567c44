//go:build !shmlink_pkgconfig

package shmlink

// Default: link the static library that `make install PREFIX=$PWD/target/stage`
// puts under the repository's target/stage, so the binding builds from a
// clone without installing anything system-wide. Build with
// `-tags shmlink_pkgconfig` to take the library found by pkg-config instead.

// #cgo CFLAGS: -I${SRCDIR}/../../target/stage/include
// #cgo LDFLAGS: ${SRCDIR}/../../target/stage/lib/libshmlink.a -lgcc_s -lutil -lrt -lpthread -lm -ldl
import "C"
