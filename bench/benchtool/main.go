// Command benchtool serves the baseline and prepares the inputs of
// bench/edge.sh, the benchmark of the edge against a bare net/http server.
//
//	benchtool bare --addr 127.0.0.1:0     serve a small JSON body, the baseline
//	benchtool jwts --users N --prefix P   print N shopper JWTs (development key), one a line
//
// It is a benchmark tool, not part of the engine.
//
// Overselling is neither prevented nor caused here.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/flashsale/flashsale/identity"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchtool:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: benchtool bare|jwts [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	switch args[0] {
	case "bare":
		addr := fs.String("addr", "127.0.0.1:0", "listen address")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return bare(ctx, *addr, stdout)
	case "jwts":
		users := fs.Int("users", 1000, "how many shoppers")
		prefix := fs.String("prefix", "bench-", "user ids are prefix + a number")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		now := time.Now()
		for i := range *users {
			tok, err := identity.MintHS256([]byte(identity.DevelopmentSecret), fmt.Sprintf("%s%d", *prefix, i),
				720*time.Hour, now, 24*time.Hour)
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, tok)
		}
		return nil
	}
	return fmt.Errorf("unknown command %q", args[0])
}

// body is about the size of a status answer for a waiting shopper.
var body = []byte(`{"state":"waiting","position":41902,"estimatedWaitSeconds":730,"unitsLeft":9120,"chance":"possible"}` + "\n")

// bare serves body to every request: the most a net/http server does for
// a request, the ceiling the edge is measured against.
func bare(ctx context.Context, addr string, stdout io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write(body)
	}), ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintf(stdout, "listening on http://%s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}
