package verbs

// DeviceAttrEx extends DeviceAttr (struct ibv_device_attr_ex).
type DeviceAttrEx struct {
	DeviceAttr
	// Extended is false when the provider has no DeviceExQuerier and the
	// fields below are unknown (zero).
	Extended bool
	// MaxInlineData is the largest max_inline_data a QP may ask for.
	MaxInlineData int
	// MaxSendSGE is the largest max_send_sge a QP may ask for.
	MaxSendSGE int
}

// DeviceExQuerier is the ibv_query_device_ex extension of a Context.
type DeviceExQuerier interface {
	QueryDeviceEx() (DeviceAttrEx, error)
}

// QueryDeviceEx returns the extended attributes of c. Without the extension
// it falls back to QueryDevice with Extended false, as libibverbs does for a
// provider without query_device_ex.
func QueryDeviceEx(c Context) (DeviceAttrEx, error) {
	if x, ok := c.(DeviceExQuerier); ok {
		return x.QueryDeviceEx()
	}
	attr, err := c.QueryDevice()
	return DeviceAttrEx{DeviceAttr: attr}, err
}

// PostCounter is implemented by QPs that count their doorbells: the calls
// into the device that each hand over a chain of WRs (one ibv_post_send on
// the ibv provider, one PostSend on soft).
type PostCounter interface {
	// PostCalls returns how many PostSend calls reached the device.
	PostCalls() uint64
	// PostedWRs returns how many send WRs the device accepted.
	PostedWRs() uint64
}

// PostCalls returns qp's doorbell count, ok=false when the provider does not
// count (then the layer above counts its own calls).
func PostCalls(qp QP) (n uint64, ok bool) {
	if c, ok := qp.(PostCounter); ok {
		return c.PostCalls(), true
	}
	return 0, false
}

// PostedWRs returns how many send WRs qp's device accepted, ok=false when
// the provider does not count them.
func PostedWRs(qp QP) (n uint64, ok bool) {
	if c, ok := qp.(PostCounter); ok {
		return c.PostedWRs(), true
	}
	return 0, false
}
