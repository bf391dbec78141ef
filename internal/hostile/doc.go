// Package hostile is for tests of listeners: TCP clients that do what no
// verbsrt client does (stay silent, send random bytes, a line of 64 MiB or
// a hello with a field out of range), and the heap and file-descriptor
// checks around them. The runtime's and rdmanet's listener tests share it.
package hostile
