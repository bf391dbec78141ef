package runtime_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/soft"
)

// enomemProvider is a soft fabric whose registrations fail as ibv_reg_mr
// fails over the locked-memory limit: ENOMEM.
type enomemProvider struct{ verbs.Provider }

type enomemDevice struct{ verbs.Device }

type enomemContext struct{ verbs.Context }

type enomemPD struct{ verbs.PD }

func (p enomemProvider) Devices() ([]verbs.Device, error) {
	devs, err := p.Provider.Devices()
	for i, d := range devs {
		devs[i] = enomemDevice{d}
	}
	return devs, err
}

func (d enomemDevice) Open() (verbs.Context, error) {
	c, err := d.Device.Open()
	if err != nil {
		return nil, err
	}
	return enomemContext{c}, nil
}

func (c enomemContext) AllocPD() (verbs.PD, error) {
	pd, err := c.Context.AllocPD()
	if err != nil {
		return nil, err
	}
	return enomemPD{pd}, nil
}

func (enomemPD) RegMR([]byte, verbs.Access) (verbs.MR, error) {
	return nil, verbs.FromErrno("ibv_reg_mr", syscall.ENOMEM, "access LOCAL_WRITE")
}

// TestMemlockNoMemory: a registration of the arena that the kernel refuses
// with ENOMEM, as it does over RLIMIT_MEMLOCK, fails Alloc with an error
// that names the limit (ulimit -l, RLIMIT_MEMLOCK) and what the runtime
// needed locked, and that still matches ErrNoMemory and ENOMEM. So does a
// connection, whose receive buffers come from the arena.
func TestMemlockNoMemory(t *testing.T) {
	fabric := soft.New(soft.Config{})
	defer fabric.Close()
	rt, err := runtime.New(runtime.WithProvider(enomemProvider{fabric}), runtime.WithMemoryLimit(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(context.Background())
	_, err = rt.Alloc(100)
	if err == nil {
		t.Fatal("Alloc succeeded with every registration failing")
	}
	checkMemlockError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := runtime.Pipe(ctx, rt, rt); err == nil {
		t.Error("a connection succeeded with every registration failing")
	} else {
		checkMemlockError(t, err)
	}
}

func checkMemlockError(t *testing.T, err error) {
	t.Helper()
	t.Log(err)
	for _, target := range []error{runtime.ErrNoMemory, verbs.ErrNoMemory, syscall.ENOMEM} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(%v, %v) = false", err, target)
		}
	}
	// The arena's chunk is the memory limit here: 1 MiB, none before it.
	for _, want := range []string{"ulimit -l", "RLIMIT_MEMLOCK", "1048576 bytes (1024 KiB)", "ibv_reg_mr"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %q: %v", want, err)
		}
	}
}
