package verbs

import "syscall"

// mapPopulate makes NewArena fault its pages in when it maps them, as
// registering memory with a device does (ibv_reg_mr pins it): otherwise
// the soft provider's first write to each page of a receive buffer takes a
// page fault on the data path, which makes the first round trips of an
// endpoint slower than the rest (bench/scale shows it beside many idle
// endpoints, whose receive buffers are spread over many pages).
const mapPopulate = syscall.MAP_POPULATE

// dropPages gives mem's pages back to the system and leaves the range
// mapped: a private anonymous mapping reads zeros after MADV_DONTNEED.
func dropPages(mem []byte) error { return syscall.Madvise(mem, syscall.MADV_DONTNEED) }
