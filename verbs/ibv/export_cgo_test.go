//go:build linux && cgo

package ibv

// UseLibraries makes the first load of each library open these sonames
// instead of rdma-core's: a test process that has loaded nothing yet can
// see what a machine without the libraries sees.
func UseLibraries(libibverbs, librdmacm string) {
	libibverbsName, librdmacmName = libibverbs, librdmacm
}
