package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/idface/idface/config"
	"github.com/idface/idface/gateway"
)

func init() {
	register("gateway", "serve the integration API for gate software (HTTP/JSON on a Unix socket or loopback)", cmdGateway)
}

func cmdGateway(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("gateway", "idface gateway --cluster DIR [--client NAME] --listen unix:/run/idface/gate.sock|127.0.0.1:PORT [--token-file FILE]\nidface gateway --config cluster.json --home DIR --listen ...\n\n"+
		"Serves the cluster to gate software in any language: HTTP with JSON bodies\n"+
		"(docs/openapi.json; examples/python/gate.py): POST /v1/identify,\n"+
		"POST /v1/enroll, POST /v1/delete, GET /v1/count, GET /v1/health. The\n"+
		"gateway holds the member's key and speaks QUIC to the cluster; whoever\n"+
		"reaches it acts as that member, so it listens only on a Unix socket (mode\n"+
		"0660: give the gate software's user the socket's group) or on a loopback\n"+
		"address. A device's gateway identifies (the accepted id or a rejection,\n"+
		"never a score); an operator's also enrolls, deletes and counts, and its\n"+
		"health answer carries a warning once more ids are enrolled than the\n"+
		"threshold was calibrated for.\n\n"+
		"It is closed to web pages: POST bodies must be Content-Type\n"+
		"application/json (else 415); a request with an Origin header or a\n"+
		"Sec-Fetch-Site other than none or same-origin is refused (403), and so on\n"+
		"TCP is a Host other than the listen address (localhost, 127.0.0.1 or\n"+
		"[::1] with its port on loopback). With --token-file every request must\n"+
		"carry 'Authorization: Bearer TOKEN' (else 401); an operator's gateway on\n"+
		"TCP needs one. Create it with: (umask 027; openssl rand -hex 32 > FILE)", stderr)
	cf := addClientFlags(fs)
	listen := fs.String("listen", "", "unix:PATH or a loopback HOST:PORT")
	tokenFile := fs.String("token-file", "", "a file holding the bearer token callers must send (one line of 16 to 4096 visible ASCII characters, not readable by every user); required of an operator's gateway on TCP")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "listen"); err != nil {
		return err
	}
	var token []byte
	if *tokenFile != "" {
		var err error
		if token, err = gateway.ReadToken(*tokenFile); err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
	}
	ln, cleanup, err := gatewayListener(*listen)
	if err != nil {
		return err
	}
	defer cleanup()
	cfg, h, cl, err := cf.openHome()
	if err != nil {
		return err
	}
	defer cl.Close()
	me, _ := cfg.Client(h.Self.Name)
	operator := config.ClientRole(me) == config.RoleOperator
	log := slog.New(slog.NewTextHandler(stderr, nil)).With("gateway", h.Self.Name)
	served := *listen
	if !strings.HasPrefix(served, "unix:") {
		served = ln.Addr().String() // the Host headers to accept
	}
	o := gateway.Options{Dim: cfg.Dim(), Operator: operator, Name: h.Self.Name, Timeout: *cf.timeout, Log: log, Listen: served, Token: token, Shards: cfg.Shards()}
	if c, ok := cfg.Calibration(); ok {
		o.Calibration = &c
	}
	handler, err := gateway.Handler(cl, o)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(shut)
	}()
	role := "device"
	if operator {
		role = "operator"
	}
	fmt.Fprintf(stdout, "idface gateway: %s (%s) through %s, serving on %s\n", h.Self.Name, role, cl.Entry(), served)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// gatewayListener listens on unix:PATH (mode 0660) or a loopback address;
// cleanup removes the socket.
func gatewayListener(addr string) (net.Listener, func(), error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if path == "" {
			return nil, nil, errors.New("--listen unix: needs a path")
		}
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			if c, err := net.Dial("unix", path); err == nil {
				c.Close()
				return nil, nil, fmt.Errorf("--listen %s: a gateway is already serving there", addr)
			}
			os.Remove(path) // a stale socket of a gateway that is gone
		}
		ln, err := net.Listen("unix", path)
		if err != nil {
			return nil, nil, fmt.Errorf("--listen %s: %w", addr, err)
		}
		if err := os.Chmod(path, 0o660); err != nil {
			ln.Close()
			return nil, nil, err
		}
		return ln, func() { ln.Close(); os.Remove(path) }, nil
	}
	if err := config.CheckLoopback(addr); err != nil {
		return nil, nil, fmt.Errorf("--listen %s: %v: the gateway holds a member's key, so it serves a Unix socket or loopback only (put a reverse proxy with authentication in front for anything else)", addr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("--listen %s: %w", addr, err)
	}
	return ln, func() { ln.Close() }, nil
}
