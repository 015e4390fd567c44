//go:build shmlink_pkgconfig

package shmlink

// With `-tags shmlink_pkgconfig`: the library and header found by
// `pkg-config shmlink` (PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a private
// prefix). This links libshmlink.so: the program then needs it at run time
// (LD_LIBRARY_PATH=PREFIX/lib, or an install under a system path).

// #cgo pkg-config: shmlink
import "C"
