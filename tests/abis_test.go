package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-stomp/stomp/v3"

	"github.com/idface/idface/abis"
	"github.com/idface/idface/cluster"
	"github.com/idface/idface/experiments"
)

// activeMQ is a broker this test owns: Debian's ActiveMQ 5.17 started
// with a configuration of its own (a STOMP connector on loopback, one
// user), killed at cleanup.
type activeMQ struct {
	addr, user, pass string
	pid              int // the broker's JVM
	// tlsAddr is its stomp+ssl connector, whose certificate (made by
	// keytool for 127.0.0.1) is in caFile.
	tlsAddr, caFile string
}

// brokerKeystore makes the broker's TLS key and certificate (for
// 127.0.0.1) in a PKCS12 keystore with keytool, and exports the
// certificate as PEM for the adapter to trust.
func brokerKeystore(t *testing.T, dir, pass string) (keystore, caPEM string) {
	t.Helper()
	keytool, err := exec.LookPath("keytool")
	if err != nil {
		t.Skip("no keytool: install Debian's activemq package (and its JRE) to run the ABIS broker test")
	}
	keystore, caPEM = filepath.Join(dir, "broker.p12"), filepath.Join(dir, "broker-ca.pem")
	for _, args := range [][]string{
		{"-genkeypair", "-alias", "broker", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=127.0.0.1",
			"-ext", "SAN=ip:127.0.0.1", "-validity", "2", "-storetype", "PKCS12", "-keystore", keystore, "-storepass", pass, "-keypass", pass},
		{"-exportcert", "-rfc", "-alias", "broker", "-keystore", keystore, "-storepass", pass, "-file", caPEM},
	} {
		if out, err := exec.Command(keytool, args...).CombinedOutput(); err != nil {
			t.Fatalf("keytool %s: %v\n%s", args[0], err, out)
		}
	}
	return keystore, caPEM
}

// startActiveMQ starts ActiveMQ, or skips the test saying why it cannot.
func startActiveMQ(t *testing.T) *activeMQ {
	t.Helper()
	const jar = "/usr/share/activemq/bin/activemq.jar"
	java, err := exec.LookPath("java")
	if err != nil {
		t.Skip("no java: install Debian's activemq package to run the ABIS broker test")
	}
	if _, err := os.Stat(jar); err != nil {
		t.Skip("no " + jar + ": install Debian's activemq package to run the ABIS broker test")
	}
	addr, tlsAddr := "127.0.0.1:"+freeTCPPort(t), "127.0.0.1:"+freeTCPPort(t)
	base := t.TempDir()
	const storePass = "broker-keystore-password"
	keystore, caPEM := brokerKeystore(t, base, storePass)
	b := &activeMQ{addr: addr, user: "abis", pass: "abis-test-password", tlsAddr: tlsAddr, caFile: caPEM}
	conf := fmt.Sprintf(`<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" useJmx="false" brokerName="idface-test" persistent="false" dataDirectory="%s/data">
    <plugins>
      <simpleAuthenticationPlugin>
        <users><authenticationUser username="%s" password="%s" groups="users"/></users>
      </simpleAuthenticationPlugin>
    </plugins>
    <sslContext>
      <sslContext keyStore="file:%s" keyStorePassword="%s" keyStoreType="PKCS12"/>
    </sslContext>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://%s"/>
      <transportConnector name="stomp+ssl" uri="stomp+ssl://%s"/>
    </transportConnectors>
  </broker>
</beans>
`, base, b.user, b.pass, keystore, storePass, addr, tlsAddr)
	cfgPath := filepath.Join(base, "activemq.xml")
	if err := os.WriteFile(cfgPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(base, "activemq.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(java, "-Xmx256m", "-Dactivemq.home=/usr/share/activemq", "-Dactivemq.classpath="+base,
		"-Dactivemq.base="+base, "-Dactivemq.conf="+base, "-Dactivemq.data="+filepath.Join(base, "data"),
		"-jar", jar, "start", "xbean:file:"+cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Skipf("starting ActiveMQ: %v", err)
	}
	b.pid = cmd.Process.Pid
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
	})
	deadline := time.Now().Add(90 * time.Second)
	for {
		c, err := stomp.Dial("tcp", addr, stomp.ConnOpt.Login(b.user, b.pass))
		if err == nil {
			c.Disconnect()
			return b
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logf.Name())
			t.Skipf("ActiveMQ did not serve STOMP on %s within 90 s (%v); its log:\n%s", addr, err, log)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// mosip is the MOSIP side of the queues: it sends requests and collects
// every answer, by requestId.
type mosip struct {
	t       *testing.T
	conn    *stomp.Conn
	in, out string
	mu      sync.Mutex
	answers map[string][]map[string]any
	seq     int
}

func newMOSIP(t *testing.T, b *activeMQ, in, out string) *mosip {
	c, err := stomp.Dial("tcp", b.addr, stomp.ConnOpt.Login(b.user, b.pass))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Disconnect() })
	sub, err := c.Subscribe(out, stomp.AckAuto)
	if err != nil {
		t.Fatal(err)
	}
	m := &mosip{t: t, conn: c, in: in, out: out, answers: map[string][]map[string]any{}}
	go func() {
		for msg := range sub.C {
			if msg.Err != nil {
				return
			}
			var a map[string]any
			if err := json.Unmarshal(msg.Body, &a); err != nil {
				t.Errorf("an answer that is not JSON: %q", msg.Body)
				continue
			}
			id, _ := a["requestId"].(string)
			m.mu.Lock()
			m.answers[id] = append(m.answers[id], a)
			m.mu.Unlock()
		}
	}()
	return m
}

// send sends a request of type op with the given fields; it returns its
// requestId.
func (m *mosip) send(op string, fields map[string]any) string {
	m.t.Helper()
	m.seq++
	rq := fmt.Sprintf("req-%04d", m.seq)
	if id, ok := fields["requestId"]; ok {
		rq, _ = id.(string)
	}
	req := map[string]any{"id": op, "version": "1.1", "requestId": rq, "requesttime": time.Now().UTC().Format("2006-01-02T15:04:05.000Z")}
	for k, v := range fields {
		req[k] = v
	}
	body, _ := json.Marshal(req)
	// As a JMS text message (no content-length), as MOSIP sends them.
	if err := m.conn.Send(m.in, "application/json", body, stomp.SendOpt.NoContentLength); err != nil {
		m.t.Fatal(err)
	}
	return rq
}

// wait returns the answer to requestId rq.
func (m *mosip) wait(rq string) map[string]any {
	m.t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		m.mu.Lock()
		a := m.answers[rq]
		m.mu.Unlock()
		if len(a) > 0 {
			return a[0]
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("no answer to %s in 2 minutes", rq)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// do sends a request and returns its answer, checked against the spec's
// shape (abis.CheckResponse).
func (m *mosip) do(op string, fields map[string]any) map[string]any {
	m.t.Helper()
	rq := m.send(op, fields)
	a := m.wait(rq)
	body, _ := json.Marshal(a)
	if err := abis.CheckResponse(body, op); err != nil {
		m.t.Errorf("%s %v: the answer does not follow the spec: %v\n%s", op, fields, err, body)
	}
	return a
}

func (m *mosip) count(rq string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.answers[rq])
}

// candidates lists an identify answer's referenceIds, failing unless it
// succeeded.
func candidates(t *testing.T, a map[string]any) []string {
	t.Helper()
	if a["returnValue"] != "1" {
		t.Fatalf("identify failed: %v", a)
	}
	cl, _ := a["candidateList"].(map[string]any)
	var ids []string
	list, _ := cl["candidates"].([]any)
	for _, c := range list {
		ids = append(ids, c.(map[string]any)["referenceId"].(string))
	}
	if fmt.Sprint(len(ids)) != cl["count"] {
		t.Fatalf("count %v for %d candidates", cl["count"], len(ids))
	}
	return ids
}

func failure(a map[string]any) string {
	if a["returnValue"] != "2" {
		return "success"
	}
	return a["failureReason"].(string)
}

// TestABISBroker (issue 48): MOSIP's ABIS API through a real ActiveMQ
// (STOMP 1.2) against a replicated cluster of real processes: every
// request type, MOSIP's dedupe flow, a gallery identify whose candidate
// ranks below ids outside the gallery, maxResults, delete then identify,
// unknown and null referenceIds, a referenceURL that cannot be reached, a
// malformed CBEFF, a request redelivered after the adapter is killed
// holding it (answered once), a request sent again (its recorded answer),
// and a holder down (flagged in analytics).
func TestABISBroker(t *testing.T) {
	b := startActiveMQ(t)
	dir, cfg := newCluster(t, "replicated", 3)

	// Three samples of each of 6 people; the CBEFF documents served over
	// HTTP as MOSIP's data share would (fixture records).
	s, err := experiments.NewSynthetic(6, 3, cfg.Dim(), 0.6, 48)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string][]byte{}
	for i, x := range s.Samples {
		doc, err := abis.FixtureCBEFF(x)
		if err != nil {
			t.Fatal(err)
		}
		docs[fmt.Sprintf("/p%d/s%d", s.Labels[i], i%3)] = doc
	}
	docs["/malformed"] = []byte("<BIR><BIR><BDBInfo><Type>Face</Type></BDBInfo></BIR>")
	hold := make(chan struct{})
	var holdOnce sync.Once
	slow := make(chan struct{})
	var slowOnce sync.Once
	fetched := make(chan string, 64)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-slow
			r.URL.Path = "/p4/s1"
		}
		if r.URL.Path == "/held" {
			fetched <- r.URL.Path
			<-hold
			r.URL.Path = "/p5/s0"
		}
		doc, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(doc)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { holdOnce.Do(func() { close(hold) }) })
	t.Cleanup(func() { slowOnce.Do(func() { close(slow) }) })
	url := func(p, k int) string { return fmt.Sprintf("%s/p%d/s%d", srv.URL, p, k) }

	in, out := "/queue/ctk-to-abis", "/queue/abis-to-ctk"
	// The adapter reaches the broker over TLS (its stomp+ssl connector),
	// trusting the broker's certificate; MOSIP's side stays on plain
	// STOMP (the broker joins the two). Without that trust it connects
	// to nothing and says why.
	tlsArgs := []string{"--broker", b.tlsAddr, "--broker-tls", "--broker-ca", b.caFile}
	untrusting(t, dir, b)
	start := abisAdapter(t, b, dir, in, out, "4", tlsArgs...)
	adapter := start()
	m := newMOSIP(t, b, in, out)

	if a := m.do(abis.OpPing, nil); failure(a) != "success" {
		t.Fatalf("ping: %v", a)
	}
	// Background records, then MOSIP's dedupe flow: insert A, identify A
	// (no duplicate), insert A's duplicate, identify it -> A.
	for p := 1; p <= 4; p++ {
		if a := m.do(abis.OpInsert, map[string]any{"referenceId": fmt.Sprintf("ref-%d", p), "referenceURL": url(p, 0)}); failure(a) != "success" {
			t.Fatalf("insert ref-%d: %v", p, a)
		}
	}
	if a := m.do(abis.OpInsert, map[string]any{"referenceId": "A", "referenceURL": url(0, 0)}); failure(a) != "success" {
		t.Fatalf("insert A: %v", a)
	}
	if ids := candidates(t, m.do(abis.OpIdentify, map[string]any{"referenceId": "A", "referenceURL": ""})); len(ids) != 0 {
		t.Fatalf("identify A before its duplicate: %v", ids)
	}
	// An insert queued right before an identify is served before it.
	m.send(abis.OpInsert, map[string]any{"referenceId": "A-dup", "referenceURL": url(0, 1)})
	if ids := candidates(t, m.do(abis.OpIdentify, map[string]any{"referenceId": "A-dup", "referenceURL": ""})); !slices.Equal(ids, []string{"A"}) {
		t.Fatalf("identify A's duplicate: %v, want [A]", ids)
	}
	if a := m.do(abis.OpInsert, map[string]any{"referenceId": "A-dup2", "referenceURL": url(0, 2)}); failure(a) != "success" {
		t.Fatalf("insert A-dup2: %v", a)
	}
	if ids := candidates(t, m.do(abis.OpIdentify, map[string]any{"referenceId": "A", "referenceURL": ""})); len(ids) != 2 {
		t.Fatalf("identify A with two duplicates: %v", ids)
	}
	if ids := candidates(t, m.do(abis.OpIdentify, map[string]any{"referenceId": "A", "referenceURL": "", "flags": map[string]any{"maxResults": "1"}})); len(ids) != 1 {
		t.Fatalf("identify A, maxResults 1: %v", ids)
	}
	// A gallery: only its ids are answered, whatever ranks above them.
	all := candidates(t, m.do(abis.OpIdentify, map[string]any{"referenceId": "A", "referenceURL": ""}))
	last := all[len(all)-1]
	gal := map[string]any{"referenceIds": []map[string]string{{"referenceId": last}, {"referenceId": "ref-1"}}}
	if ids := candidates(t, m.do(abis.OpIdentify, map[string]any{"referenceId": "A", "referenceURL": "", "gallery": gal, "flags": map[string]any{"maxResults": 1}})); !slices.Equal(ids, []string{last}) {
		t.Fatalf("identify A in the gallery [%s ref-1] below %s: %v", last, all[0], ids)
	}
	// Identify by referenceURL alone (a null referenceId).
	if ids := candidates(t, m.do(abis.OpIdentify, map[string]any{"referenceId": nil, "referenceURL": url(3, 1)})); !slices.Equal(ids, []string{"ref-3"}) {
		t.Fatalf("identify by referenceURL: %v, want [ref-3]", ids)
	}
	// Delete, then identify.
	if a := m.do(abis.OpDelete, map[string]any{"referenceId": "A-dup"}); failure(a) != "success" {
		t.Fatalf("delete A-dup: %v", a)
	}
	if ids := candidates(t, m.do(abis.OpIdentify, map[string]any{"referenceId": "A", "referenceURL": ""})); slices.Contains(ids, "A-dup") || len(ids) != 1 {
		t.Fatalf("identify A after A-dup's deletion: %v", ids)
	}
	for _, c := range []struct {
		name, op string
		fields   map[string]any
		want     abis.Failure
	}{
		{"identify a deleted referenceId", abis.OpIdentify, map[string]any{"referenceId": "A-dup", "referenceURL": ""}, abis.FailRefIDNotFound},
		{"delete a deleted referenceId", abis.OpDelete, map[string]any{"referenceId": "A-dup"}, abis.FailRefIDNotFound},
		{"identify an unknown referenceId", abis.OpIdentify, map[string]any{"referenceId": "nobody", "referenceURL": ""}, abis.FailRefIDNotFound},
		{"identify a null referenceId and no referenceURL", abis.OpIdentify, map[string]any{"referenceId": nil, "referenceURL": ""}, abis.FailMissingRefID},
		{"insert a null referenceId", abis.OpInsert, map[string]any{"referenceId": nil, "referenceURL": url(5, 0)}, abis.FailMissingRefID},
		{"insert a referenceId again", abis.OpInsert, map[string]any{"referenceId": "A", "referenceURL": url(5, 0)}, abis.FailRefIDExists},
		{"insert a deleted referenceId again", abis.OpInsert, map[string]any{"referenceId": "A-dup", "referenceURL": url(5, 0)}, abis.FailRefIDExists},
		{"insert from an unreachable referenceURL", abis.OpInsert, map[string]any{"referenceId": "B", "referenceURL": "http://127.0.0.1:1/cbeff"}, abis.FailFetch},
		{"insert from a missing document", abis.OpInsert, map[string]any{"referenceId": "B", "referenceURL": srv.URL + "/gone"}, abis.FailFetch},
		{"insert a malformed CBEFF", abis.OpInsert, map[string]any{"referenceId": "B", "referenceURL": srv.URL + "/malformed"}, abis.FailCBEFF},
		{"an unknown version", abis.OpPing, map[string]any{"version": "9.9"}, abis.FailVersion},
	} {
		if a := m.do(c.op, c.fields); failure(a) != fmt.Sprint(int(c.want)) {
			t.Errorf("%s: %v, want failure %d", c.name, a, c.want)
		}
	}
	if a := m.do(abis.OpReferenceCount, nil); failure(a) != "success" || a["count"] != "6" {
		t.Errorf("referenceCount: %v, want 6 (4 background, A, A-dup2)", a)
	}
	if a := m.do(abis.OpPendingJobs, nil); failure(a) != "success" || a["jobscount"] != "0" {
		t.Errorf("pendingJobs with nothing else sent: %v", a)
	}

	// pendingJobs counts what the adapter holds and what still waits at
	// the broker: with the adapter stopped, a pendingJobs and then five
	// inserts whose documents come only later are queued; the next
	// adapter takes the first four (its in-flight bound), and the
	// pendingJobs answer counts the five inserts, one at most with
	// the adapter, the others at the broker.
	adapter.Process.Signal(syscall.SIGKILL)
	adapter.Wait()
	jobs := m.send(abis.OpPendingJobs, nil)
	var slowIns []string
	for i := range 5 {
		slowIns = append(slowIns, m.send(abis.OpInsert, map[string]any{"referenceId": fmt.Sprintf("slow-%d", i), "referenceURL": srv.URL + "/slow"}))
	}
	adapter = start()
	if a := m.wait(jobs); failure(a) != "success" || a["jobscount"] != "5" {
		t.Errorf("pendingJobs before 5 inserts held at the adapter and queued at the broker: %v, want 5", a)
	}
	slowOnce.Do(func() { close(slow) })
	for _, rq := range slowIns {
		if a := m.wait(rq); failure(a) != "success" {
			t.Fatalf("a slow insert: %v", a)
		}
	}
	if a := m.do(abis.OpPendingJobs, nil); failure(a) != "success" || a["jobscount"] != "0" {
		t.Errorf("pendingJobs once the inserts are answered: %v", a)
	}

	// A request sent again (same requestId) gets its recorded answer and
	// is not done twice.
	first := m.do(abis.OpInsert, map[string]any{"requestId": "again", "referenceId": "C", "referenceURL": url(5, 1)})
	second := m.do(abis.OpInsert, map[string]any{"requestId": "again", "referenceId": "C", "referenceURL": url(5, 1)})
	if failure(first) != "success" || !mapsEqual(first, second) {
		t.Errorf("a request sent twice: %v then %v, want the same success", first, second)
	}

	// The adapter is killed while it holds an insert; the broker
	// redelivers it to the next adapter, which answers it once.
	held := m.send(abis.OpInsert, map[string]any{"referenceId": "D", "referenceURL": srv.URL + "/held"})
	select {
	case <-fetched:
	case <-time.After(time.Minute):
		t.Fatal("the adapter never fetched the held document")
	}
	adapter.Process.Signal(syscall.SIGKILL)
	adapter.Wait()
	holdOnce.Do(func() { close(hold) })
	start()
	if a := m.wait(held); failure(a) != "success" {
		t.Fatalf("the redelivered insert: %v", a)
	}
	ids := candidates(t, m.do(abis.OpIdentify, map[string]any{"referenceId": nil, "referenceURL": url(5, 2)}))
	if slices.Sort(ids); !slices.Equal(ids, []string{"C", "D"}) {
		t.Errorf("identify person 5 after the redelivered insert: %v, want C and D", ids)
	}
	time.Sleep(500 * time.Millisecond)
	if n := m.count(held); n != 1 {
		t.Errorf("the redelivered insert was answered %d times", n)
	}

	// A holder down: the cluster answers degraded, and so does MOSIP's
	// answer's analytics.
	if err := cluster.Kill(cfg, "p2"); err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.Client(cfg, "device", "p1")
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if r, err := cl.Identify(context.Background(), s.Samples[0], 1); err == nil && r.Degraded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("with p2 killed a minute ago, the cluster answers no degraded identify")
		}
	}
	a := m.do(abis.OpIdentify, map[string]any{"referenceId": nil, "referenceURL": url(3, 2)})
	if ids := candidates(t, a); !slices.Equal(ids, []string{"ref-3"}) {
		t.Errorf("identify person 3 with p2 down: %v", ids)
	}
	if an, _ := a["candidateList"].(map[string]any)["analytics"].(map[string]any); an["degraded"] != "true" || an["complete"] != "false" {
		t.Errorf("identify with p2 down: analytics %v, want degraded and not complete", an)
	}
	// A degraded answer without scores is the decision alone: when that
	// is the record itself, whether it has duplicates is not known, and
	// the answer says it failed rather than "none".
	if a := m.do(abis.OpIdentify, map[string]any{"referenceId": "A", "referenceURL": ""}); failure(a) != "1" {
		t.Errorf("identify A with p2 down: %v, want failure 1", a)
	}
}

// abisAdapter returns a function that starts `idface abis` on cluster
// dir and broker b (the fixture extractor, plain HTTP allowed; extra
// flags after the others, so that a later --broker wins), one journal for
// every start; each process is killed at cleanup, and the adapters' log
// shown if the test failed.
func abisAdapter(t *testing.T, b *activeMQ, dir, in, out, inFlight string, extra ...string) func() *exec.Cmd {
	work := t.TempDir()
	pass := filepath.Join(work, "broker-password")
	if err := os.WriteFile(pass, []byte(b.pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(work, "abis.journal")
	var alog bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the adapter's log:\n%s", alog.String())
		}
	})
	return func() *exec.Cmd {
		c := exec.Command(idfaceBin, append([]string{"abis", "--cluster", dir, "--broker", b.addr, "--user", b.user, "--password-file", pass,
			"--inbound", in, "--outbound", out, "--journal", journal, "--fixture-extractor", "--allow-http", "--in-flight", inFlight}, extra...)...)
		c.Stdout, c.Stderr = &alog, &alog
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Process.Kill(); c.Wait() })
		return c
	}
}

func mapsEqual(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// untrusting checks that an adapter reaching the broker over TLS without
// trusting its certificate (the system's roots, not the test CA) refuses
// the connection, saying it is the certificate, and goes on retrying.
func untrusting(t *testing.T, dir string, b *activeMQ) {
	t.Helper()
	pass := filepath.Join(t.TempDir(), "broker-password")
	if err := os.WriteFile(pass, []byte(b.pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := exec.Command(idfaceBin, "abis", "--cluster", dir, "--broker", b.tlsAddr, "--broker-tls", "--user", b.user, "--password-file", pass,
		"--inbound", "/queue/untrusting-in", "--outbound", "/queue/untrusting-out", "--journal", filepath.Join(t.TempDir(), "j"), "--fixture-extractor")
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c.Stdout, c.Stderr = pw, pw
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	defer func() { c.Process.Kill(); c.Wait(); pr.Close() }()
	seen := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		var lines []string
		for sc.Scan() {
			lines = append(lines, sc.Text())
			if strings.Contains(sc.Text(), "over TLS") && strings.Contains(sc.Text(), "certificate") {
				seen <- ""
				return
			}
		}
		seen <- strings.Join(lines, "\n")
	}()
	select {
	case rest := <-seen:
		if rest != "" {
			t.Fatalf("an adapter that does not trust the broker's certificate exited without saying so:\n%s", rest)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("an adapter that does not trust the broker's certificate did not say so within 60 s")
	}
}

// TestABISQueuedBound: abis.Queued counts a queue at the broker without
// consuming it, stops at its bound, and leaves the connection serving
// (a browse cut short must not stall the other subscriptions).
func TestABISQueuedBound(t *testing.T) {
	b := startActiveMQ(t)
	c, err := stomp.Dial("tcp", b.addr, stomp.ConnOpt.Login(b.user, b.pass))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Disconnect()
	const q, n = "/queue/counted", 300
	for i := range n {
		if err := c.Send(q, "text/plain", fmt.Appendf(nil, "message %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range 2 { // counting consumes nothing
		if got, err := abis.Queued(ctx, c, q, 1000, nil); err != nil || got != n {
			t.Fatalf("Queued: %d, %v; want %d", got, err, n)
		}
	}
	for range 3 {
		if got, err := abis.Queued(ctx, c, q, 10, nil); err != nil || got != 10 {
			t.Fatalf("Queued up to 10: %d, %v", got, err)
		}
	}
	sub, err := c.Subscribe(q, stomp.AckAuto)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		select {
		case m := <-sub.C:
			if m.Err != nil || string(m.Body) != fmt.Sprintf("message %d", i) {
				t.Fatalf("message %d after the counts: %v %q", i, m.Err, m.Body)
			}
		case <-ctx.Done():
			t.Fatalf("message %d not received after the counts: the connection stalled", i)
		}
	}
}
