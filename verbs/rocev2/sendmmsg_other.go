//go:build !linux || !(amd64 || arm64)

package rocev2

// sendmmsg writes nothing where there is no sendmmsg(2) support here:
// writeMany writes the packets one by one.
func (t *Transport) sendmmsg([]outPacket) (int, error) { return 0, nil }
