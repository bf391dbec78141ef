package runtime_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/netip"

	vrt "github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/verbs"
	"github.com/verbsrt/verbsrt/verbs/rocev2"
)

// A server listens and accepts; a client dials. Each side gets an
// Endpoint, and a message sent from one is received at the other.
func ExampleRuntime_Dial() {
	ctx := context.Background()
	rt, err := vrt.New() // the soft provider: no NIC, no root
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	ln, err := rt.Listen("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	go func() {
		srv, err := ln.Accept(ctx)
		if err != nil {
			log.Fatal(err)
		}
		m, err := srv.Recv(ctx)
		if err != nil {
			log.Fatal(err)
		}
		reply := fmt.Sprintf("got %q", m.Bytes())
		m.Release() // the receive buffer goes back to the runtime
		srv.SendBytes(ctx, []byte(reply)).Wait(ctx)
	}()

	cli, err := rt.Dial(ctx, ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close(ctx)
	if _, err := cli.SendBytes(ctx, []byte("hello")).Wait(ctx); err != nil {
		log.Fatal(err)
	}
	m, err := cli.Recv(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer m.Release()
	fmt.Println(string(m.Bytes()))
	// Output: got "hello"
}

// One side exposes memory and sends its RemoteRef; the other READs and
// WRITEs it with no work on the exposing side's CPU.
func ExampleExposure_RemoteRef() {
	ctx := context.Background()
	rt, err := vrt.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)
	cli, srv := examplePair(ctx, rt)

	// The server exposes a block for reading and writing.
	block, _ := rt.Alloc(4096)
	copy(block.Bytes(), "the server's data")
	exp, err := block.Expose(vrt.RemoteRead | vrt.RemoteWrite)
	if err != nil {
		log.Fatal(err)
	}
	defer exp.Close()
	wire, _ := exp.RemoteRef().MarshalBinary()
	srv.SendBytes(ctx, wire).Wait(ctx)

	// The client decodes the reference.
	m, _ := cli.Recv(ctx)
	var ref vrt.RemoteRef
	if err := ref.UnmarshalBinary(m.Bytes()); err != nil {
		log.Fatal(err)
	}
	m.Release()

	local, _ := rt.Alloc(4096)
	c, err := cli.Read(ctx, local.Slice(0, 17), ref).Wait(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("read %d bytes: %q\n", c.ByteLen, local.Bytes()[:17])

	n := copy(local.Bytes(), "the client's data")
	if _, err := cli.Write(ctx, local.Slice(0, n), ref.At(100)).Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("the server's block at 100: %q\n", block.Bytes()[100:100+n])
	// Output:
	// read 17 bytes: "the server's data"
	// the server's block at 100: "the client's data"
}

// A READ or WRITE moves as many bytes as its local range holds: a local
// range shorter than the remote reference moves that many (ByteLen says
// so), a longer one is refused before it reaches the device.
func ExampleEndpoint_Read() {
	ctx := context.Background()
	rt, err := vrt.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)
	cli, _ := examplePair(ctx, rt)

	remote, _ := rt.Alloc(64)
	exp, _ := remote.Expose(vrt.RemoteRead)
	defer exp.Close()
	local, _ := rt.Alloc(128)

	c, err := cli.Read(ctx, local.Slice(0, 16), exp.RemoteRef()).Wait(ctx)
	fmt.Println("16 of 64 bytes:", c.ByteLen, err)
	_, err = cli.Read(ctx, local.Slice(0, 128), exp.RemoteRef()).Wait(ctx)
	fmt.Println("128 into 64 bytes refused:", errors.Is(err, verbs.ErrInvalidArgument))
	// Output:
	// 16 of 64 bytes: 16 <nil>
	// 128 into 64 bytes refused: true
}

// Two runtimes on the rocev2 provider (RoCE v2 in UDP, from an
// unprivileged socket), as two processes would be: each opens a provider
// of its own on a local address and connects through its listener. Give
// each process its host's address to cross hosts, or to reach the
// kernel's rxe.
func Example_rocev2() {
	ctx := context.Background()
	open := func() (*vrt.Runtime, func()) {
		prov, err := rocev2.New(rocev2.Config{Addrs: []netip.Addr{netip.IPv6Loopback()}})
		if err != nil {
			log.Fatal(err)
		}
		rt, err := vrt.New(vrt.WithProvider(prov))
		if err != nil {
			log.Fatal(err)
		}
		return rt, func() { rt.Close(ctx); prov.Close() }
	}
	server, closeServer := open()
	defer closeServer()
	client, closeClient := open()
	defer closeClient()

	ln, err := server.Listen("127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer ln.Close()
	block, _ := server.Alloc(64)
	exp, _ := block.Expose(vrt.RemoteWrite)
	defer exp.Close()
	go func() {
		ep, err := ln.Accept(ctx)
		if err != nil {
			log.Fatal(err)
		}
		wire, _ := exp.RemoteRef().MarshalBinary()
		ep.SendBytes(ctx, wire).Wait(ctx)
	}()

	ep, err := client.Dial(ctx, ln.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	m, _ := ep.Recv(ctx)
	var ref vrt.RemoteRef
	ref.UnmarshalBinary(m.Bytes())
	m.Release()
	local, _ := client.Alloc(64)
	n := copy(local.Bytes(), "over UDP")
	if _, err := ep.Write(ctx, local.Slice(0, n), ref).Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %q\n", client.Stats().Provider, block.Bytes()[:n])
	// Output: rocev2: "over UDP"
}
