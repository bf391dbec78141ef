//go:build linux && cgo

package ibv

/*
#include <stdlib.h>
#include "lib.h"
*/
import "C"

import (
	"sync"
	"unsafe"

	"github.com/verbsrt/verbsrt/verbs"
)

// libibverbs and librdmacm are loaded at the first use of each (Devices,
// ListenCM, DialCM), not at start-up: a program that never asks for the ibv
// provider runs where rdma-core is not installed, and one that does is told
// what to install.
var (
	verbsOnce, rdmacmOnce sync.Once
	verbsErr, rdmacmErr   error

	// The sonames loaded; tests name a library that does not exist.
	libibverbsName = C.VRT_LIBIBVERBS
	librdmacmName  = C.VRT_LIBRDMACM
)

// loadVerbs loads libibverbs once; its error matches verbs.ErrNotSupported.
func loadVerbs() error {
	verbsOnce.Do(func() {
		verbsErr = loadLib(libibverbsName, func(soname, why *C.char, n C.int) C.int {
			return C.vrt_load_verbs(soname, why, n)
		})
	})
	return verbsErr
}

// loadRDMACM loads librdmacm (and libibverbs) once; its error matches
// verbs.ErrNotSupported.
func loadRDMACM() error {
	if err := loadVerbs(); err != nil {
		return err
	}
	rdmacmOnce.Do(func() {
		rdmacmErr = loadLib(librdmacmName, func(soname, why *C.char, n C.int) C.int {
			return C.vrt_load_rdmacm(soname, why, n)
		})
	})
	return rdmacmErr
}

func loadLib(soname string, load func(soname, why *C.char, n C.int) C.int) error {
	cname := C.CString(soname)
	defer C.free(unsafe.Pointer(cname))
	var why [512]C.char
	if load(cname, &why[0], C.int(len(why))) == 0 {
		return nil
	}
	return verbs.Errorf("dlopen "+soname, verbs.ErrNotSupported, "%s; %s", C.GoString(&why[0]), installHint)
}

// Libraries loads libibverbs and librdmacm as Devices and ListenCM do (once
// per process) and reports, for each, the file loaded or why it could not
// be. librdmacm needs libibverbs: where that did not load, librdmacm's
// error says so.
func Libraries() []Library {
	verbsLib := Library{Name: "libibverbs", Soname: libibverbsName, Err: loadVerbs()}
	cmLib := Library{Name: "librdmacm", Soname: librdmacmName, Err: loadRDMACM()}
	for _, l := range []*Library{&verbsLib, &cmLib} {
		if l.Err == nil {
			l.Path = loadedPath(l.Name + ".so")
		}
	}
	return []Library{verbsLib, cmLib}
}
