package tests

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idface/idface/client"
	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/network/quicnet"
	"github.com/idface/idface/protocol"
)

// TestRotateWithGrace (issue 20 item 7): a gate's device rotates its key
// as docs/DEPLOY.md says (stage, assemble, restart the holders one at a
// time, finish, assemble, restart again) while it identifies without a
// pause: no identification fails. Afterwards its old key is refused.
func TestRotateWithGrace(t *testing.T) {
	dir, cfg, d, _ := replicatedCluster(t, 20, 31)
	dev := cluster.HomeDir(dir, "device")
	oldCert, err := os.ReadFile(filepath.Join(dev, "identity.crt"))
	if err != nil {
		t.Fatal(err)
	}
	oldKey, err := os.ReadFile(filepath.Join(dev, "identity.key"))
	if err != nil {
		t.Fatal(err)
	}

	// The gate: one identification after another, each with the device's
	// home and the cluster.json of the moment (a gate restarts its client
	// after its key changes).
	var mu sync.Mutex
	var failures []string
	n := 0
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			err := func() error {
				p, err := config.Load(dir)
				if err != nil {
					return err
				}
				cl, err := cluster.Client(p, "device", "p1")
				if err != nil {
					return err
				}
				defer cl.Close()
				qctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				_, err = cl.Identify(qctx, d.queries[i%len(d.queries)], 1)
				return err
			}()
			mu.Lock()
			n++
			if err != nil {
				failures = append(failures, err.Error())
			}
			mu.Unlock()
		}
	})

	reassemble := func() {
		t.Helper()
		var pubs []string
		for _, m := range append(cfg.Servers(), cfg.Clients()...) {
			pubs = append(pubs, filepath.Join(cluster.HomeDir(dir, m.Name), m.Name+".pub.json"))
		}
		must(t, append([]string{"cluster", "assemble", "--out", filepath.Join(dir, config.File), "--mode", "replicated"}, pubs...)...)
	}
	restartHolders := func() {
		t.Helper()
		p, err := config.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Parties() {
			if err := cluster.Stop(p, m.Name, 10*time.Second); err != nil {
				t.Fatal(err)
			}
			must(t, "cluster", "up", "--cluster", dir)
			time.Sleep(2 * time.Second) // the entries see it back
		}
	}
	time.Sleep(time.Second)
	must(t, "party", "rotate", "--home", dev, "--stage")
	reassemble()
	restartHolders()
	must(t, "party", "rotate", "--home", dev, "--finish")
	time.Sleep(time.Second)
	reassemble()
	restartHolders()
	time.Sleep(time.Second)
	stop()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if n < 10 || len(failures) > 0 {
		t.Fatalf("%d of %d identifications failed during the rotation: %s", len(failures), n, strings.Join(failures[:min(3, len(failures))], "; "))
	}
	t.Logf("%d identifications during the rotation, none failed", n)

	// The old key is refused now.
	old, err := tls.X509KeyPair(oldCert, oldKey)
	if err != nil {
		t.Fatal(err)
	}
	p, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	dl := quicnet.NewDialer(old, p.Directory(config.Coordinator), protocol.Version)
	defer dl.Close()
	oc, err := client.New(p, dl, "p1")
	if err != nil {
		t.Fatal(err)
	}
	qctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := oc.Identify(qctx, d.queries[0], 1); err == nil {
		t.Fatal("the device's old key still identifies after the rotation")
	}
}
