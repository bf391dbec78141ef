//go:build linux && cgo

package ibv

import "github.com/verbsrt/verbsrt/verbs"

// UseLibraries makes the first load of each library open these sonames
// instead of rdma-core's: a test process that has loaded nothing yet can
// see what a machine without the libraries sees.
func UseLibraries(libibverbs, librdmacm string) {
	libibverbsName, librdmacmName = libibverbs, librdmacm
}

// GIDTableFromVerbs reads port's GID table from libibverbs alone
// (ibv_query_gid_table), each netdev named by looking its ifindex up in
// this network namespace: no sysfs, and no fallback to it.
func GIDTableFromVerbs(c verbs.Context, port uint8) ([]verbs.GIDEntry, error) {
	x := c.(*devContext)
	raw, err := x.queryGIDTableVerbs()
	if err != nil {
		return nil, err
	}
	return fromIBVEntries(raw, port, func(_ int, ifindex uint32) string { return netdevName(ifindex, "") }), nil
}

// GIDTableFromSysfs reads port's GID table from sysfs alone.
func GIDTableFromSysfs(c verbs.Context, port uint8) ([]verbs.GIDEntry, error) {
	x := c.(*devContext)
	pa, err := x.QueryPort(port)
	if err != nil {
		return nil, err
	}
	return readGIDTable(sysfsRoot, x.dev.name, port, pa.LinkLayer)
}

// HasGIDTable reports whether the libibverbs loaded has
// _ibv_query_gid_table.
var HasGIDTable = hasGIDTable
