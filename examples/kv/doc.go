// Kv is a storage-engine-style use of the runtime: clients read and update
// a server's memory with one-sided RDMA operations, and the server's CPU
// takes no part in the data path.
//
// The server allocates one region of fixed-size slots (-slots x -slotsize
// bytes: an 8-byte version word, then the value) and exposes it, once, to
// its clients with RemoteRead|RemoteWrite|RemoteAtomic: they READ slots,
// WRITE values and change version words with CAS and FETCH_ADD, so they
// need all three, and the exposure's key reaches that region and nothing
// else of the server's memory. At connect time the server sends each
// client the region info with SendBytes: a magic, the exposure's
// RemoteRef in the runtime's own encoding (RemoteRef.AppendBinary:
// versioned, 21 bytes, checked by UnmarshalBinary), the slot count and the
// slot size. Clients name a slot with RemoteRef.Slice and a word in it
// with At. When the server closes, it revokes the exposure and frees the
// region: a client's access after that fails with REM_ACCESS_ERR.
//
// Each client goroutine (-clients) then plays rounds: it issues a batch of
// RDMA READs (-batch, all in flight together) and waits for all their
// futures, checks every slot image it read, and updates a few slots
// (-updates, from the -hot first slots, which the clients contend for)
// under a lock taken with CAS on the version word:
//
//	CAS version v -> v+1   lock (v even); a READ of the slot rides behind it
//	WRITE value            stamp v+2, counter+1, fill derived from the counter
//	FETCH_ADD version +1   publish v+2, unlocked
//
// At the end the server checks its region: every slot must be unlocked and
// hold the value committed under its version, and the counters must add up
// to the CASes the clients won. The program prints a summary and exits
// non-zero on any inconsistency or error.
//
// The example waits on futures in the three ways the runtime offers: Wait
// (the batched reads and the writes), Done in a select (the lock CAS,
// watched together with the run's context) and Then (the publishing
// FETCH_ADD, checked and counted by a callback while the client goes on).
//
//	$ go run ./examples/kv
//	kv: 1024 slots x 64 bytes (rkey 0x19d), 8 clients x 100 rounds of 16 reads and 4 updates
//	ran 0.48 s: 26893 reads/s, 6593 updates/s
//	reads:   12800: 12059 consistent, 741 locked or torn (skipped)
//	updates: 3138 committed (CAS won), 3138 published (Then), 3048 CAS lost to contention, 62 given up
//	verify:  1024 slots consistent, sum of counters 3138 = committed updates 3138: OK
package main
