package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

// TestProviderEnv: $VERBSRT_PROVIDER chooses the provider of every
// command that opens one when -provider is absent, the flag wins over it,
// and a bad value of either is refused naming the valid ones.
func TestProviderEnv(t *testing.T) {
	provider := func(cmd string, args ...string) (string, error) {
		switch cmd {
		case "bench":
			cfg, err := parseBench(args, io.Discard, io.Discard)
			return cfg.provider, err
		case "pingpong":
			cfg, err := parsePingpong(args, io.Discard, io.Discard)
			return cfg.provider, err
		}
		cfg, err := parseServeMetrics(args, io.Discard, io.Discard)
		return cfg.provider.name, err
	}
	for _, tc := range []struct {
		env, cmd string
		args     []string
		want     string // "": an error
	}{
		{"", "bench", nil, "soft"},
		{"", "bench", []string{"-server"}, "ibv"},
		{"", "pingpong", nil, "ibv"},
		{"", "serve-metrics", nil, "soft"},
		{"rocev2", "bench", nil, "rocev2"},
		{"rocev2", "bench", []string{"-server"}, "rocev2"},
		{"rocev2", "bench", []string{"write", "::1"}, "rocev2"},
		{"rocev2", "pingpong", nil, "rocev2"},
		{"rocev2", "serve-metrics", nil, "rocev2"},
		{"rocev2", "bench", []string{"-provider", "soft"}, "soft"}, // the flag wins
		{"soft", "pingpong", []string{"-provider", "rocev2", "-rocev2-port", "4791"}, "rocev2"},
		{"rocev2", "bench", []string{"-rocev2-addr", "fd00::1"}, "rocev2"},
		{"ibv", "bench", []string{"-rocev2-addr", "fd00::1"}, ""}, // for rocev2 only, says the error
		{"rxe", "bench", nil, ""},
		{"rxe", "pingpong", nil, ""},
		{"rxe", "serve-metrics", nil, ""},
		{"rxe", "bench", []string{"-provider", "soft"}, "soft"}, // unread when the flag is given
		{"", "bench", []string{"-provider", "rxe"}, ""},
	} {
		t.Setenv(providerEnv, tc.env)
		got, err := provider(tc.cmd, tc.args...)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("%s=%s verbsrt %s %q: accepted, provider %s", providerEnv, tc.env, tc.cmd, tc.args, got)
		case tc.want == "" && !strings.Contains(err.Error(), "soft, rocev2, ibv") && !strings.Contains(err.Error(), "for -provider rocev2"):
			t.Errorf("%s=%s verbsrt %s %q: %v, which names neither the providers nor the one the flags are for", providerEnv, tc.env, tc.cmd, tc.args, err)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("%s=%s verbsrt %s %q: provider %q, %v; want %s", providerEnv, tc.env, tc.cmd, tc.args, got, err, tc.want)
		}
	}
}

// TestDevicesRoCEv2: verbsrt devices -provider rocev2 shows the device
// bound to -rocev2-addr, its GID that address and its port's LID the UDP
// port the kernel picked for -rocev2-port 0; an IPv4 address is refused,
// saying why.
func TestDevicesRoCEv2(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run([]string{"devices", "-provider", "rocev2", "-rocev2-addr", "::1", "-rocev2-port", "0"}, &out, &errOut)
	if code != exitOK {
		if strings.Contains(errOut.String(), "cannot bind ::1") {
			t.Skipf("no IPv6 loopback (::1), which the rocev2 provider binds: %s", errOut.String())
		}
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"hca_id:\trocev2_0\n", "link_layer:             Ethernet", "GID[  0]:               ::1\n"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "port_lid:               0\n") {
		t.Errorf("port 0: the LID should be the port the kernel picked:\n%s", out.String())
	}
	errOut.Reset()
	if code := run([]string{"devices", "-provider", "rocev2", "-rocev2-addr", "127.0.0.1"}, io.Discard, &errOut); code != exitUsage ||
		!strings.Contains(errOut.String(), "IPv6 only") {
		t.Errorf("IPv4: exit %d, %s", code, errOut.String())
	}
}
