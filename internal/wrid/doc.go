// Package wrid is the one layout of the wr_id of every work request the
// runtime posts: the actors make and read the sends', the pollers tell
// sends from receives, the runtime's receive side makes and reads the
// receives'. See wrid.go for the bit layout.
package wrid
