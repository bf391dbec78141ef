// Soak runs two runtimes for a long time and shows whether what the
// process holds stays flat through a long run of operations and through
// connect/close churn:
//
//	go run ./bench/soak -ops 40000000 -cycles 5000
//
// Two phases, on two runtimes with default options (the soft provider
// unless -provider says otherwise):
//
//   - ops: one endpoint pair; -callers goroutines each WRITE and Wait,
//     every -sendevery'th operation a SEND instead, which a goroutine on
//     the other side receives and releases, until -ops operations
//     completed;
//   - churn: -cycles times, connect a pair (Listen/Dial), one WRITE and
//     one SEND through it, close both endpoints.
//
// About every twentieth of each phase it samples, after two forced
// collections: HeapInuse and heap objects, goroutines, OS threads, open
// file descriptors, both runtimes' mapped arena, their receive buffers and
// connected endpoints. It prints a table per phase and, as the verdict,
// each figure's last sample against the one a tenth of the way in (past
// the warm-up: pools and rings grow to their working size first). A leak
// of a few hundred bytes per operation or per cycle shows there as growth
// of megabytes.
package main
