//go:build !(linux && (amd64 || arm64))

package rocev2

// mmsgSend is sendmmsg's scratch, which other platforms do not need.
type mmsgSend struct{}

// sendmmsg writes nothing where the platform has no sendmmsg: the caller
// writes the packets one by one.
func (t *Transport) sendmmsg(*mmsgSend, []outPacket) (int, error) { return 0, nil }
