package rdmanet_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"

	vrt "github.com/verbsrt/verbsrt/runtime"
	"github.com/verbsrt/verbsrt/runtime/rdmanet"
)

// net/http over RDMA: the server serves on an rdmanet Listener, and the
// client's transport dials with rdmanet.Dial.
func Example_http() {
	ctx := context.Background()
	rt, err := vrt.New()
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)

	ln, err := rdmanet.Listen(rt, "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello over %s", r.Proto)
	})}
	go srv.Serve(ln)
	defer srv.Close()

	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return rdmanet.Dial(ctx, rt, addr)
		},
	}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(string(body))
	// Output: hello over HTTP/1.1
}
