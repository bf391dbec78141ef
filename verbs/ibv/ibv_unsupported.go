//go:build !linux || !cgo

package ibv

import (
	"runtime"

	"github.com/verbsrt/verbsrt/verbs"
)

// Provider is the libibverbs provider. In this build (no cgo, or not Linux)
// it has no devices: Devices returns an error matching
// verbs.ErrNotSupported that says why. Safe for concurrent use.
type Provider struct{}

// New returns the provider.
func New() *Provider { return &Provider{} }

// Name returns "ibv".
func (*Provider) Name() string { return "ibv" }

// Devices returns an error matching verbs.ErrNotSupported: this build has no
// libibverbs.
func (*Provider) Devices() ([]verbs.Device, error) {
	return nil, errNoCgo("ibv_get_device_list")
}

// errNoCgo is the error of every entry point, op, of this build.
func errNoCgo(op string) error {
	return verbs.Errorf(op, verbs.ErrNotSupported,
		"this build of verbs/ibv has no cgo (%s/%s, CGO_ENABLED=0 or no C compiler): rebuild with cgo; %s",
		runtime.GOOS, runtime.GOARCH, installHint)
}

var _ verbs.Provider = (*Provider)(nil)

// Libraries reports both libraries as not loadable: this build cannot load
// them.
func Libraries() []Library {
	return []Library{
		{Name: "libibverbs", Soname: "libibverbs.so.1", Err: errNoCgo("dlopen libibverbs.so.1")},
		{Name: "librdmacm", Soname: "librdmacm.so.1", Err: errNoCgo("dlopen librdmacm.so.1")},
	}
}
