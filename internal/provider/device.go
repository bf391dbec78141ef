package provider

import (
	"errors"
	"fmt"

	"github.com/verbsrt/verbsrt/verbs"
)

// FindDevice returns p's device of that name, or its first for "", with
// the C tools' errors.
func FindDevice(p verbs.Provider, name string) (verbs.Device, error) {
	devs, err := p.Devices()
	if err != nil {
		return nil, fmt.Errorf("failed to get IB devices list: %w", err)
	}
	for _, d := range devs {
		if name == "" || d.Name() == name {
			return d, nil
		}
	}
	if name == "" {
		return nil, errors.New("no IB devices found")
	}
	return nil, fmt.Errorf("IB device %s not found", name)
}
