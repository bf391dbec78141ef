package verbs

import "syscall"

// mapPopulate makes NewArena fault its pages in when it maps them, as
// registering memory with a device does (ibv_reg_mr pins it): otherwise
// the soft provider's first write to each page of a receive buffer took a
// page fault on the data path, and the first 15,000 round trips on a pair
// beside 5,000 idle ones took 2.6-4.2x as long as alone (bench/README.md,
// "The active pair's SEND/Recv at 5,000 pairs is a warm-up").
const mapPopulate = syscall.MAP_POPULATE
