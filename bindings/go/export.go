package shmlink

/*
#include "shim.h"
*/
import "C"

import (
	"runtime/cgo"
	"unsafe"
)

//export goShmlinkHandle
func goShmlinkHandle(h C.uintptr_t, req *C.uint8_t, n C.size_t, resp *C.shmlink_response) C.uint32_t {
	var in []byte
	if n > 0 {
		in = make([]byte, int(n))
		copy(in, unsafe.Slice((*byte)(unsafe.Pointer(req)), int(n)))
	} else {
		in = []byte{}
	}
	out, code, msg := handle(cgo.Handle(h), in)
	if code != 0 {
		if msg != "" {
			cm := C.CString(msg)
			C.shmlink_response_set_error_message(resp, cm)
			C.free(unsafe.Pointer(cm))
		}
		return C.uint32_t(code)
	}
	if len(out) > 0 {
		if st := C.shmlink_response_write(resp, (*C.uint8_t)(unsafe.Pointer(&out[0])), C.size_t(len(out))); st != C.SHMLINK_OK {
			cm := C.CString("shmlink (Go): cannot write the response: " + Status(st).String())
			C.shmlink_response_set_error_message(resp, cm)
			C.free(unsafe.Pointer(cm))
			return C.uint32_t(CodeHandlerException)
		}
	}
	return 0
}
