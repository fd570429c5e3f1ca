package callgrind

import "unsafe"

// request makes the client request a describes ({request, arg1, …, arg5})
// with valgrind's magic instruction sequence, and returns its answer, or 0
// when not under valgrind.
//
//go:noescape
func request(a *[6]uintptr) uintptr

func uintptrOf(p *byte) uintptr { return uintptr(unsafe.Pointer(p)) }
