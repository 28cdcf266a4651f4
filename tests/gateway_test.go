package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idface/idface/cluster"
)

// TestGatewayPython: `idface gateway` of a real cluster's operator on
// loopback, with a bearer token, driven by the Python example
// (examples/python/gate.py, the standard library only): enroll,
// identify (accepted with the id, and a stranger rejected), count, delete;
// a web page's requests are refused; a device's gateway on a Unix socket
// identifies and refuses to enroll, to Go's client and to gate.py (which
// could not reach a Unix socket, issue 38 item 5); a gateway refuses a
// public address, and an operator's on TCP refuses to start without a
// token file.
func TestGatewayPython(t *testing.T) {
	if err := exec.Command("python3", "-c", "import http.client").Run(); err != nil {
		t.Skip("python3 is not installed:", err)
	}
	dir, _ := newCluster(t, "2pc", 2)
	d := newDataset(t, t.TempDir(), 5, 37)
	if _, errs, code := idface(t, "gateway", "--cluster", dir, "--listen", "0.0.0.0:8480"); code == 0 || !strings.Contains(errs, "loopback") {
		t.Fatalf("a gateway on a public address: exit %d: %s", code, errs)
	}
	addr := "127.0.0.1:" + freeTCPPort(t)
	if _, errs, code := idface(t, "gateway", "--cluster", dir, "--listen", addr); code == 0 || !strings.Contains(errs, "--token-file") {
		t.Fatalf("an operator's gateway on TCP without a token: exit %d: %s", code, errs)
	}
	tokenFile := filepath.Join(t.TempDir(), "gate.token")
	os.WriteFile(tokenFile, []byte("0123456789abcdef0123456789abcdef\n"), 0o640)
	startGateway(t, "--cluster", dir, "--listen", addr, "--token-file", tokenFile)
	url := "http://" + addr

	tmpl := func(name string, x []float32) string {
		p := filepath.Join(t.TempDir(), name+".json")
		b, _ := json.Marshal(x)
		os.WriteFile(p, b, 0o644)
		return p
	}
	gateAt := func(url string, args ...string) (map[string]any, int) {
		t.Helper()
		cmd := exec.Command("python3", append([]string{"../examples/python/gate.py", "--url", url}, args...)...)
		var errb strings.Builder
		cmd.Stderr = &errb
		out, err := cmd.Output()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		var ans map[string]any
		if err := json.Unmarshal(out, &ans); err != nil {
			t.Fatalf("gate.py %v: %q (%s)", args, out, errb.String())
		}
		return ans, code
	}
	gate := func(args ...string) (map[string]any, int) {
		t.Helper()
		return gateAt(url, append([]string{"--token-file", tokenFile}, args...)...)
	}
	for i := range 4 {
		if ans, code := gate("enroll", "--id", d.names[i], "--template", tmpl("g", d.gallery[i])); code != 0 || ans["enrolled"] != d.names[i] {
			t.Fatalf("enroll %d: %d %v", i, code, ans)
		}
	}
	if ans, code := gate("identify", "--template", tmpl("q", d.queries[1])); code != 0 || ans["decision"] != "accepted" || ans["id"] != d.names[1] {
		t.Fatalf("identify: %d %v", code, ans)
	}
	if ans, code := gate("identify", "--template", tmpl("s", d.queries[4])); code != 0 || ans["decision"] != "rejected" {
		t.Fatalf("identify a stranger: %d %v", code, ans)
	}
	if ans, code := gate("count"); code != 0 || ans["count"] != 4.0 {
		t.Fatalf("count: %d %v", code, ans)
	}
	if ans, code := gate("exists", "--id", d.names[2]); code != 0 || ans["enrolled"] != true || ans["id"] != d.names[2] {
		t.Fatalf("exists: %d %v", code, ans)
	}
	if ans, code := gate("exists", "--id", "nobody"); code != 0 || ans["enrolled"] != false {
		t.Fatalf("exists of an id never enrolled: %d %v", code, ans)
	}
	want := slices.Sorted(slices.Values(d.names[:4]))
	if ans, code := gate("ids", "--limit", "3", "--all"); code != 0 || fmt.Sprint(ans["ids"]) != fmt.Sprint(want) || ans["more"] != false {
		t.Fatalf("ids --all in pages of 3: %d %v, want %v", code, ans, want)
	}
	if ans, code := gate("ids", "--limit", "3"); code != 0 || ans["more"] != true || ans["after"] != want[2] {
		t.Fatalf("ids --limit 3: %d %v", code, ans)
	}
	if ans, code := gate("delete", "--id", d.names[1]); code != 0 || ans["deleted"] != d.names[1] {
		t.Fatalf("delete: %d %v", code, ans)
	}
	if ans, code := gate("delete", "--id", d.names[1]); code != 1 || !strings.Contains(ans["error"].(string), "delete") {
		t.Fatalf("delete again: %d %v", code, ans)
	}
	if ans, code := gate("health"); code != 0 || ans["status"] != "ok" || ans["mode"] != "2pc" {
		t.Fatalf("health: %d %v", code, ans)
	}

	// What a web page in a browser on the gate's host could send.
	for name, h := range map[string]map[string]string{
		"cross-site text/plain": {"Content-Type": "text/plain", "Origin": "http://evil.example"},
		"DNS rebinding":         {"Host": "rebind.evil.example:" + strings.TrimPrefix(addr, "127.0.0.1:")},
		"no token":              {},
	} {
		req, _ := http.NewRequest("POST", url+"/v1/delete", strings.NewReader(`{"id":"`+d.names[0]+`"}`))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		req.Host = h["Host"]
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden && resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: %s", name, resp.Status)
		}
	}
	if ans, code := gate("count"); code != 0 || ans["count"] != 3.0 {
		t.Fatalf("count after a web page's deletions: %d %v", code, ans)
	}

	// A device's gateway on a Unix socket.
	sock := filepath.Join(t.TempDir(), "gate.sock")
	startGateway(t, "--cluster", dir, "--client", "device", "--listen", "unix:"+sock)
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o660 {
		t.Fatalf("the socket: %v %v", fi, err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	post := func(path, body string) (int, map[string]any) {
		resp, err := hc.Post("http://gate"+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var ans map[string]any
		json.NewDecoder(resp.Body).Decode(&ans)
		return resp.StatusCode, ans
	}
	q, _ := json.Marshal(map[string]any{"template": d.queries[2]})
	if code, ans := post("/v1/identify", string(q)); code != 200 || ans["id"] != d.names[2] {
		t.Fatalf("a device identifies: %d %v", code, ans)
	}
	if code, _ := post("/v1/enroll", `{"id":"x","template":[1]}`); code != http.StatusForbidden {
		t.Fatalf("a device enrolls: %d", code)
	}
	if ans, code := gateAt("unix:"+sock, "identify", "--template", tmpl("q", d.queries[2])); code != 0 || ans["id"] != d.names[2] {
		t.Fatalf("gate.py on the Unix socket identifies: %d %v", code, ans)
	}
	if ans, code := gateAt("unix:"+sock, "enroll", "--id", "x", "--template", tmpl("g", d.gallery[0])); code != 1 || !strings.Contains(fmt.Sprint(ans["error"]), "device (device) may not send Enroll") {
		t.Fatalf("gate.py enrolls through a device's gateway: %d %v", code, ans)
	}
}

// startGateway runs `idface gateway` until the test ends and waits until
// it serves.
func startGateway(t *testing.T, args ...string) int {
	t.Helper()
	cmd := exec.Command(idfaceBin, append([]string{"gateway"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb strings.Builder
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	ready := make(chan bool, 1)
	go func() {
		s := bufio.NewScanner(out)
		ready <- s.Scan() && strings.Contains(s.Text(), "serving on")
	}()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatalf("idface gateway %v did not start: %s", args, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("idface gateway %v: no start in 30 s: %s", args, errb.String())
	}
	return cmd.Process.Pid
}

// freeTCPPort returns a free TCP port on 127.0.0.1.
func freeTCPPort(t *testing.T) string {
	t.Helper()
	port, err := cluster.FreePort("tcp", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(port)
}
