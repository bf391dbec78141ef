// Package rlimit reads the process's resource limits by the names Linux's
// /proc/self/limits gives them ("Max locked memory"): the syscall package
// has no RLIMIT_MEMLOCK, the limit registered memory counts against. The
// runtime reads it to say what a failed registration needed, and the
// verbsrt command's doctor to check it before a deployment does. It holds
// the runtime's memory limit default and arena chunk too, the numbers
// both compare the limit with.
package rlimit
