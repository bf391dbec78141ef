package provider

import (
	"errors"
	"fmt"
	"strings"

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

// NoSuchDevice is the error that the provider called provider has no
// device called name, which the flag flagName asked for: it names the
// devices it has, and matches verbs.ErrNotFound.
func NoSuchDevice(flagName, name, provider string, devs []verbs.Device) error {
	names := make([]string, len(devs))
	for i, d := range devs {
		names[i] = d.Name()
	}
	return fmt.Errorf("%s %s: no such device on provider %s (it has %s): %w",
		flagName, name, provider, strings.Join(names, ", "), verbs.ErrNotFound)
}
