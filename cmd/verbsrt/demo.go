package main

import (
	"io"

	"github.com/verbsrt/verbsrt/internal/rcdemo"
	"github.com/verbsrt/verbsrt/verbs"
)

func runDemo(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("demo", "usage: verbsrt demo [-s SIZE] [-b BATCH] [-provider soft|rocev2]\n\n"+
		"Connects an RC QP on soft0 to one on soft1 (rocev2_0 and rocev2_1 with -provider rocev2:\n"+
		"two UDP sockets), runs an RDMA WRITE, a READ, a SEND with immediate data, a FETCH_AND_ADD,\n"+
		"a CMP_AND_SWP and a batch of WRITEs posted with one doorbell, checks the memory each\n"+
		"touched and prints what happened.")
	size := fs.Int("s", 4096, "message size in bytes, 8 to 1048576")
	batch := fs.Int("b", 64, "WRITEs posted in one PostSend, 1 to 512")
	spec := providerSpec{name: "soft"}
	addProviderFlags(fs, &spec, "soft; both ends are in this process, on soft or rocev2")
	if err := parseFlags(fs, args, stdout, stderr); err != nil {
		return err
	}
	if err := resolveProvider(fs, &spec, "soft"); err != nil {
		return usageError{err}
	}
	switch {
	case spec.name == "ibv":
		return usageErrorf("-provider ibv: the demo runs both ends in this process, on soft or rocev2 (verbsrt bench and pingpong run on ibv)")
	case fs.NArg() > 0:
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	case *size < 8 || *size > 1<<20 || *batch < 1 || *batch > 512:
		return usageErrorf("-s must be 8..1048576 and -b 1..512")
	}
	p, closeProv, err := openProvider(spec, 2)
	if err != nil {
		return err
	}
	defer closeProv()
	return demo(stdout, p, *size, *batch)
}

// demo runs the demo on p's first two devices and prints what happened.
func demo(w io.Writer, p verbs.Provider, size, batch int) error { return rcdemo.Run(w, p, size, batch) }
