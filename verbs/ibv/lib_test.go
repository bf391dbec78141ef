//go:build linux && cgo

package ibv_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/ibv"
)

func init() { reportMissingLibs = reportLoadErrors }

// reportLoadErrors is the child's side: it loads nothing before this, so
// the sonames it is given are the ones dlopen sees.
func reportLoadErrors(libs string) {
	verbsName, cmName, _ := strings.Cut(libs, ",")
	ibv.UseLibraries(verbsName, cmName)
	_, err := ibv.New().Devices()
	fmt.Printf("devices: %v: not-supported=%t\n", err, errors.Is(err, verbs.ErrNotSupported))
	_, err = ibv.ListenCM("127.0.0.1:0")
	fmt.Printf("listen: %v: not-supported=%t\n", err, errors.Is(err, verbs.ErrNotSupported))
	_, err = ibv.DialCM(context.Background(), "", "127.0.0.1:1")
	fmt.Printf("dial: %v: not-supported=%t\n", err, errors.Is(err, verbs.ErrNotSupported))
	for _, l := range ibv.Libraries() {
		fmt.Printf("library %s: %v: path=%q: not-supported=%t\n", l.Name, l.Err, l.Path, errors.Is(l.Err, verbs.ErrNotSupported))
	}
	fmt.Printf("gid table: %t\n", ibv.HasGIDTable())
}

// TestMissingLibraries runs the provider in a child process where
// libibverbs (or librdmacm) cannot be loaded, as on a machine without
// rdma-core: every entry point fails with verbs.ErrNotSupported, naming the
// library and the packages to install, and nothing crashes. Libraries
// (what verbsrt doctor prints) reports the same error for the library
// that did not load, and the file of one that did.
func TestMissingLibraries(t *testing.T) {
	const install = "apt install libibverbs1 ibverbs-providers librdmacm1"
	for _, tc := range []struct {
		name, libs string
		// want: the error of each entry point names one of these.
		devices, cm []string
	}{
		{"libibverbs", "libverbsrt-absent-ibverbs.so.1,librdmacm.so.1",
			[]string{"libverbsrt-absent-ibverbs.so.1"}, []string{"libverbsrt-absent-ibverbs.so.1"}},
		// Devices loads the real libibverbs where the machine has one;
		// the connection manager then names the absent librdmacm.
		{"librdmacm", "libibverbs.so.1,libverbsrt-absent-rdmacm.so.1",
			nil, []string{"libverbsrt-absent-rdmacm.so.1", "libibverbs.so.1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), missingLibsEnv+"="+tc.libs)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				t.Fatalf("child: %v\n%s", err, out.String())
			}
			lines := map[string]string{}
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				if k, v, ok := strings.Cut(l, ": "); ok {
					lines[k] = v
				}
			}
			check := func(entry string, names []string) {
				line, ok := lines[entry]
				if !ok {
					t.Fatalf("child printed no %s line:\n%s", entry, out.String())
				}
				if names == nil && strings.HasPrefix(line, "<nil>") {
					return // the machine has libibverbs and a device list
				}
				named := false
				for _, n := range names {
					named = named || strings.Contains(line, n)
				}
				if !named || !strings.Contains(line, install) || !strings.HasSuffix(line, "not-supported=true") {
					if names == nil && strings.Contains(line, "not-supported=true") {
						return // no libibverbs here either: any not-supported error
					}
					t.Errorf("%s: %s\nwant verbs.ErrNotSupported naming one of %q and %q", entry, line, names, install)
				}
			}
			check("devices", tc.devices)
			check("listen", tc.cm)
			check("dial", tc.cm)
			check("library libibverbs", tc.devices)
			check("library librdmacm", tc.cm)
			// A library that loaded is reported with the file it came from.
			for _, name := range []string{"libibverbs", "librdmacm"} {
				if l := lines["library "+name]; strings.HasPrefix(l, "<nil>") && !strings.Contains(l, `path="/`) {
					t.Errorf("library %s loaded but its file is not named: %s", name, l)
				}
			}
		})
	}
}
