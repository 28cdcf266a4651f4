package deploy_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/deploy"
	"github.com/idface/idface/harness/inproc"
	"github.com/idface/idface/host/home"
)

// rendered is a YAML stream decoded strictly (an unknown or misspelt
// field is an error) into the k8s.io/api types, by kind.
type rendered struct {
	stateful []appsv1.StatefulSet
	services []corev1.Service
	secrets  []corev1.Secret
	maps     []corev1.ConfigMap
	budgets  []policyv1.PodDisruptionBudget
	policies []networkingv1.NetworkPolicy
}

// strictInto decodes doc strictly into a new element of *list.
func strictInto[T any](doc []byte, list *[]T) error {
	var v T
	err := yaml.UnmarshalStrict(doc, &v)
	*list = append(*list, v)
	return err
}

func decode(t *testing.T, stream []byte) rendered {
	t.Helper()
	var r rendered
	for i, doc := range bytes.Split(stream, []byte("\n---\n")) {
		if i == 0 {
			continue // the header comment
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		var err error
		switch tm.APIVersion + " " + tm.Kind {
		case "apps/v1 StatefulSet":
			err = strictInto(doc, &r.stateful)
		case "v1 Service":
			err = strictInto(doc, &r.services)
		case "v1 Secret":
			err = strictInto(doc, &r.secrets)
		case "v1 ConfigMap":
			err = strictInto(doc, &r.maps)
		case "networking.k8s.io/v1 NetworkPolicy":
			err = strictInto(doc, &r.policies)
		case "policy/v1 PodDisruptionBudget":
			err = strictInto(doc, &r.budgets)
		default:
			t.Fatalf("document %d: unexpected %s %s", i, tm.APIVersion, tm.Kind)
		}
		if err != nil {
			t.Fatalf("document %d (%s) does not decode strictly into the Kubernetes type: %v\n%s", i, tm.Kind, err, doc)
		}
	}
	return r
}

// TestK8s renders a replicated test cluster made for Kubernetes and checks
// the invariants the deployment rests on: each pod mounts one Secret, its
// own member's, holding that member's home and no other; ports agree with
// the configuration; members never share a node; probes reach /healthz;
// the pods run as no root with a read-only root.
func TestK8s(t *testing.T) {
	dir := t.TempDir()
	p, err := cluster.Init(dir, cluster.Options{Mode: config.ModeReplicated, Parties: 3, Kubernetes: "gate-test"})
	if err != nil {
		t.Fatal(err)
	}
	cfgJSON, err := os.ReadFile(filepath.Join(dir, config.File))
	if err != nil {
		t.Fatal(err)
	}
	homes := map[string]map[string][]byte{}
	for _, m := range p.Servers() {
		if homes[m.Name], err = home.Files(cluster.HomeDir(dir, m.Name)); err != nil {
			t.Fatal(err)
		}
		if _, ok := homes[m.Name]["lock"]; ok {
			t.Fatal("a home's lock went into its Secret")
		}
	}
	out, err := deploy.K8s(p, cfgJSON, deploy.Options{Namespace: "gate-test", Image: "registry.example/idface:1", Homes: homes,
		Sizes: map[string]deploy.Size{"p1": {Disk: "20Gi", Memory: "3Gi"}}})
	if err != nil {
		t.Fatal(err)
	}
	r := decode(t, out)
	servers := p.Servers()
	if len(r.stateful) != len(servers) || len(r.secrets) != len(servers) || len(r.services) != len(servers) || len(r.maps) != 1 || len(r.budgets) != 1 {
		t.Fatalf("rendered %d StatefulSets, %d Secrets, %d Services, %d ConfigMaps, %d budgets for %d servers",
			len(r.stateful), len(r.secrets), len(r.services), len(r.maps), len(r.budgets), len(servers))
	}
	if r.maps[0].Data[config.File] != string(cfgJSON) {
		t.Fatal("the ConfigMap does not hold the configuration as it is")
	}
	secretOf := map[string]corev1.Secret{}
	for _, s := range r.secrets {
		secretOf[s.Name] = s
	}
	mountedBy := map[string]string{}
	for _, ss := range r.stateful {
		member := ss.Spec.Template.Labels["idface.io/member"]
		m, ok := p.Server(member)
		if !ok || ss.Name != deploy.Name(member) || ss.Namespace != "gate-test" {
			t.Fatalf("StatefulSet %s/%s for member %q", ss.Namespace, ss.Name, member)
		}
		pod := ss.Spec.Template.Spec
		// One Secret per pod, its own member's, mounted by no other pod;
		// it holds that member's home (its pin), keys private after install.
		var secrets []string
		for _, v := range pod.Volumes {
			if v.Secret != nil {
				secrets = append(secrets, v.Secret.SecretName)
			}
			if v.Projected != nil || v.HostPath != nil {
				t.Errorf("%s mounts a projected or host volume", member)
			}
		}
		if len(secrets) != 1 || secrets[0] != deploy.SecretName(member) {
			t.Fatalf("%s mounts Secrets %v, want only %s", member, secrets, deploy.SecretName(member))
		}
		if other, dup := mountedBy[secrets[0]]; dup {
			t.Fatalf("%s and %s mount the same Secret", member, other)
		}
		mountedBy[secrets[0]] = member
		s, ok := secretOf[secrets[0]]
		if !ok {
			t.Fatalf("%s's Secret is not rendered", member)
		}
		if !bytes.Contains(s.Data["home.json"], []byte(`"pin": "`+m.Pin+`"`)) || !bytes.Equal(s.Data["identity.key"], homes[member]["identity.key"]) {
			t.Fatalf("%s's Secret does not hold its own home", member)
		}
		for name, others := range homes {
			if name != member && bytes.Equal(s.Data["identity.key"], others["identity.key"]) {
				t.Fatalf("%s's Secret holds %s's key", member, name)
			}
		}
		if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
			t.Errorf("%s's pods get a service account token", member)
		}

		// Ports: the pod listens where the configuration says the others
		// dial it, through its headless Service; metrics and probes on 9464.
		if m.Addr != deploy.PodAddress("gate-test", member) {
			t.Fatalf("%s advertises %s", member, m.Addr)
		}
		c := pod.Containers[0]
		if len(pod.Containers) != 1 || len(pod.InitContainers) != 1 {
			t.Fatalf("%s: %d containers, %d init containers", member, len(pod.Containers), len(pod.InitContainers))
		}
		var quic, health int32
		for _, cp := range c.Ports {
			switch {
			case cp.Name == "quic" && cp.Protocol == corev1.ProtocolUDP:
				quic = cp.ContainerPort
			case cp.Name == "health" && cp.Protocol == corev1.ProtocolTCP:
				health = cp.ContainerPort
			default:
				t.Errorf("%s exposes %s %d/%s (no metrics unless asked)", member, cp.Name, cp.ContainerPort, cp.Protocol)
			}
		}
		if quic != deploy.QUICPort || health != deploy.HealthPort {
			t.Fatalf("%s: quic port %d, health %d", member, quic, health)
		}
		args := strings.Join(c.Command, " ")
		for _, want := range []string{fmt.Sprintf("--listen 0.0.0.0:%d", quic), fmt.Sprintf("--health-addr 0.0.0.0:%d", health), "--home /run/idface/home", "--data /var/lib/idface/data"} {
			if !strings.Contains(args, want) {
				t.Errorf("%s runs %q, without %q", member, args, want)
			}
		}
		if strings.Contains(args, "--metrics-addr") {
			t.Errorf("%s serves its metrics to the cluster network unasked: %q", member, args)
		}
		if ss.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
			t.Errorf("%s's pods are replaced by the controller (%s): every member would restart at once", member, ss.Spec.UpdateStrategy.Type)
		}
		if ss.Spec.Template.Annotations["idface.io/config-hash"] == "" {
			t.Errorf("%s's pods do not carry the configuration's hash", member)
		}
		if init := strings.Join(pod.InitContainers[0].Command, " "); init != "/idface party install --from /etc/idface/secret --home /run/idface/home" {
			t.Errorf("%s's init container runs %q", member, init)
		}
		for _, pr := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
			if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != "/healthz" || pr.HTTPGet.Port.StrVal != "health" {
				t.Fatalf("%s: a probe is not /healthz on the health port: %+v", member, pr)
			}
		}
		var svc *corev1.Service
		for i := range r.services {
			if r.services[i].Name == ss.Spec.ServiceName {
				svc = &r.services[i]
			}
		}
		if svc == nil || svc.Spec.ClusterIP != "None" || !matches(svc.Spec.Selector, ss.Spec.Template.Labels) {
			t.Fatalf("%s has no headless Service selecting its pods", member)
		}
		if svc.Spec.Ports[0].Port != quic || svc.Spec.Ports[0].Protocol != corev1.ProtocolUDP {
			t.Fatalf("%s's Service: %+v", member, svc.Spec.Ports)
		}

		// Anti-affinity: required, per node, against every other member
		// of the cluster and not against itself.
		aa := pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		if len(aa) != 1 || aa[0].TopologyKey != "kubernetes.io/hostname" || aa[0].NamespaceSelector == nil || len(aa[0].NamespaceSelector.MatchLabels)+len(aa[0].NamespaceSelector.MatchExpressions) != 0 {
			t.Fatalf("%s: anti-affinity %+v", member, aa)
		}
		sel, err := metav1.LabelSelectorAsSelector(aa[0].LabelSelector)
		if err != nil {
			t.Fatal(err)
		}
		for _, other := range r.stateful {
			l := labels.Set(other.Spec.Template.Labels)
			if sel.Matches(l) == (other.Name == ss.Name) {
				t.Fatalf("%s's anti-affinity selects %s: %v (want: every other member, not itself)", member, other.Name, sel.Matches(l))
			}
		}

		// No root, no privilege, read-only root file system, keys on memory.
		psc := pod.SecurityContext
		if psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
			t.Errorf("%s may run as root", member)
		}
		for _, cc := range append(pod.InitContainers, pod.Containers...) {
			sc := cc.SecurityContext
			if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s/%s: root file system writable or privilege escalation allowed", member, cc.Name)
			}
		}
		for _, v := range pod.Volumes {
			if v.Name == "home" && (v.EmptyDir == nil || v.EmptyDir.Medium != corev1.StorageMediumMemory) {
				t.Errorf("%s's home is not on memory", member)
			}
		}
		if len(ss.Spec.VolumeClaimTemplates) != 1 {
			t.Fatalf("%s: %d volume claims", member, len(ss.Spec.VolumeClaimTemplates))
		}
		disk := ss.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]
		want := "10Gi"
		if member == "p1" {
			want = "20Gi"
			if mem := c.Resources.Requests[corev1.ResourceMemory]; mem.String() != "3Gi" {
				t.Errorf("p1's memory request: %s", mem.String())
			}
		}
		if disk.String() != want {
			t.Errorf("%s's volume: %s, want %s", member, disk.String(), want)
		}
	}

	// One budget over every rendered member: one down at a time.
	b := r.budgets[0]
	if b.Spec.MaxUnavailable == nil || b.Spec.MaxUnavailable.IntValue() != 1 {
		t.Fatalf("budget: %+v", b.Spec)
	}
	bsel, err := metav1.LabelSelectorAsSelector(b.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	for _, ss := range r.stateful {
		if !bsel.Matches(labels.Set(ss.Spec.Template.Labels)) {
			t.Errorf("the budget does not cover %s", ss.Name)
		}
	}

	// One server alone (an organisation's own render): its Secret, no
	// budget (it would protect nothing, and a pod under two budgets cannot
	// be evicted); with --metrics, the metrics port on the Service.
	out, err = deploy.K8s(p, cfgJSON, deploy.Options{Namespace: "gate-test", Image: "i", Members: []string{"p2"}, Homes: map[string]map[string][]byte{"p2": homes["p2"]}, Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	r = decode(t, out)
	if len(r.stateful) != 1 || len(r.secrets) != 1 || len(r.budgets) != 0 || r.secrets[0].Name != deploy.SecretName("p2") {
		t.Fatalf("one server: %d StatefulSets, %d Secrets, %d budgets", len(r.stateful), len(r.secrets), len(r.budgets))
	}
	// The metrics port is open to Prometheus only; QUIC and /healthz to all.
	if len(r.policies) != 1 || !matches(r.policies[0].Spec.PodSelector.MatchLabels, r.stateful[0].Spec.Template.Labels) {
		t.Fatalf("--metrics: %d network policies, or not over p2's pods", len(r.policies))
	}
	for _, in := range r.policies[0].Spec.Ingress {
		for _, pt := range in.Ports {
			open := len(in.From) == 0
			if (pt.Port.IntValue() == deploy.MetricsPort) == open {
				t.Errorf("port %d: open to all %v", pt.Port.IntValue(), open)
			}
			if !open && in.From[0].PodSelector.MatchLabels["app.kubernetes.io/name"] != "prometheus" {
				t.Errorf("metrics open to %+v", in.From)
			}
		}
	}
	if ports := r.services[0].Spec.Ports; len(ports) != 2 || ports[1].Port != deploy.MetricsPort || !strings.Contains(strings.Join(r.stateful[0].Spec.Template.Spec.Containers[0].Command, " "), fmt.Sprintf("--metrics-addr 0.0.0.0:%d", deploy.MetricsPort)) {
		t.Fatalf("--metrics: %+v", ports)
	}
}

// TestK8sRefuses: a loopback address, another member's home, a bad name or
// size, a client, no image.
func TestK8sRefuses(t *testing.T) {
	local := t.TempDir()
	p, err := cluster.Init(local, cluster.Options{Mode: config.ModeBlind, Parties: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.K8s(p, nil, deploy.Options{Image: "i"}); err == nil || !strings.Contains(err.Error(), "no pod can dial") {
		t.Fatalf("a loopback cluster: %v", err)
	}
	dir := t.TempDir()
	if p, err = cluster.Init(dir, cluster.Options{Mode: config.ModeBlind, Parties: 2, Kubernetes: "ns"}); err != nil {
		t.Fatal(err)
	}
	h2, err := home.Files(cluster.HomeDir(dir, "p2"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.K8s(p, nil, deploy.Options{Image: "i", Namespace: "ns", Disk: "1.5Gi", Memory: "512Mi"}); err != nil {
		t.Fatalf("sizes 1.5Gi and 512Mi: %v", err)
	}
	for _, c := range []struct {
		name, want string
		o          deploy.Options
	}{
		{"another's home", "not the one the configuration pins", deploy.Options{Image: "i", Namespace: "ns", Homes: map[string]map[string][]byte{"p1": h2}}},
		{"a client", "not a server", deploy.Options{Image: "i", Namespace: "ns", Members: []string{"client"}}},
		{"no image", "image", deploy.Options{Namespace: "ns"}},
		{"a bad size", "quantity", deploy.Options{Image: "i", Namespace: "ns", Disk: "ten gigs"}},
		{"a zero size", "quantity", deploy.Options{Image: "i", Namespace: "ns", Disk: "0"}},
		{"a bad namespace", "DNS label", deploy.Options{Image: "i", Namespace: "Gate_Test"}},
		{"another namespace", "render it into the namespace", deploy.Options{Image: "i", Namespace: "other"}},
		{"a home not rendered", "not rendered", deploy.Options{Image: "i", Namespace: "ns", Members: []string{"p1"}, Homes: map[string]map[string][]byte{"p2": h2}}},
	} {
		if _, err := deploy.K8s(p, nil, c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
	}
}

// matches reports whether a Service selector picks pods labelled l.
func matches(sel, l map[string]string) bool {
	for k, v := range sel {
		if l[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

// TestK8sMemberNames: names the configuration allows but Kubernetes does
// not take (upper case, '_', '.', a '-' at an end, too long for a
// StatefulSet's pods) are refused, naming the member.
func TestK8sMemberNames(t *testing.T) {
	for _, name := range []string{"Org-A", "org_a", "org.a", "a-", strings.Repeat("a", 46)} {
		lit := inproc.Literal(config.Literal{Mode: config.ModeBlind, Dim: 64, Beta: 16}, 2)
		lit.Parties[0].Name, lit.Parties[0].Addr = name, "gate.example:7443"
		lit.Parties[1].Addr = "gate2.example:7443"
		lit.Decider.Addr = "decider.example:7443"
		p, err := config.New(lit, "")
		if err != nil {
			t.Fatalf("%q: %v", name, err)
		}
		if _, err := deploy.K8s(p, nil, deploy.Options{Image: "i"}); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("member %q: %v", name, err)
		}
	}
	lit := inproc.Literal(config.Literal{Mode: config.ModeBlind, Dim: 64, Beta: 16}, 2)
	lit.Parties[0].Name = strings.Repeat("a", 45)
	lit.Parties[0].Addr, lit.Parties[1].Addr, lit.Decider.Addr = "a.example:7443", "b.example:7443", "c.example:7443"
	p, err := config.New(lit, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := deploy.K8s(p, nil, deploy.Options{Image: "i", Expose: true}); err != nil {
		t.Fatalf("a name of 45 characters: %v", err)
	}
}

// TestK8sShards renders a sharded blind and 2PC test cluster: every member runs as
// a coordinator StatefulSet (one pod, no volume of rows) and a shard
// StatefulSet of S pods, each with its own volume and run as the shard its
// ordinal names; the two sets' selectors never pick each other's pods;
// every pod mounts its own member's Secret only; members never share a
// node, while a member's own pods may; the budget covers every pod.
func TestK8sShards(t *testing.T) {
	for _, mode := range []config.Mode{config.ModeBlind, config.Mode2PC, config.ModeHE} {
		t.Run(string(mode), func(t *testing.T) { testK8sShards(t, mode) })
	}
}

func testK8sShards(t *testing.T, mode config.Mode) {
	const S = 3
	dir := t.TempDir()
	p, err := cluster.Init(dir, cluster.Options{Mode: mode, Parties: 2, Kubernetes: "gate-test", Shards: S})
	if err != nil {
		t.Fatal(err)
	}
	cfgJSON, err := os.ReadFile(filepath.Join(dir, config.File))
	if err != nil {
		t.Fatal(err)
	}
	out, err := deploy.K8s(p, cfgJSON, deploy.Options{Namespace: "gate-test", Image: "registry.example/idface:1", Metrics: true})
	if err != nil {
		t.Fatal(err)
	}
	r := decode(t, out)
	servers := p.Servers()
	if len(r.stateful) != 2*len(servers) || len(r.services) != 2*len(servers) || len(r.policies) != 2*len(servers) || len(r.budgets) != 1 {
		t.Fatalf("rendered %d StatefulSets, %d Services, %d policies, %d budgets for %d sharded servers", len(r.stateful), len(r.services), len(r.policies), len(r.budgets), len(servers))
	}
	services := map[string]corev1.Service{}
	for _, s := range r.services {
		services[s.Name] = s
	}
	var sets []appsv1.StatefulSet
	for _, m := range servers {
		if m.Addr != deploy.PodAddress("gate-test", m.Name) {
			t.Fatalf("%s's coordinator advertises %s", m.Name, m.Addr)
		}
		for s, a := range m.Shards {
			if a != deploy.ShardPodAddress("gate-test", m.Name, s) {
				t.Fatalf("%s's shard %d advertises %s", m.Name, s, a)
			}
		}
	}
	for _, ss := range r.stateful {
		member := ss.Spec.Template.Labels["idface.io/member"]
		pod := ss.Spec.Template.Spec
		args := strings.Join(pod.Containers[0].Command, " ")
		shards := ss.Name == deploy.ShardSet(member)
		switch {
		case shards && (*ss.Spec.Replicas != S || len(ss.Spec.VolumeClaimTemplates) != 1 || !strings.Contains(args, "--shard-ordinal")):
			t.Fatalf("%s: %d replicas, %d volume claims, %q", ss.Name, *ss.Spec.Replicas, len(ss.Spec.VolumeClaimTemplates), args)
		case !shards && (ss.Name != deploy.Name(member) || *ss.Spec.Replicas != 1 || len(ss.Spec.VolumeClaimTemplates) != 0 || strings.Contains(args, "--shard")):
			t.Fatalf("%s (coordinator): %d replicas, %d volume claims, %q", ss.Name, *ss.Spec.Replicas, len(ss.Spec.VolumeClaimTemplates), args)
		}
		// Pod s's DNS name is the shard address: the set's serviceName is
		// a headless Service that selects exactly its pods.
		svc, ok := services[ss.Spec.ServiceName]
		if !ok || svc.Spec.ClusterIP != "None" || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(ss.Spec.Template.Labels)) {
			t.Fatalf("%s: no headless Service %s selecting its pods", ss.Name, ss.Spec.ServiceName)
		}
		var secrets []string
		for _, v := range pod.Volumes {
			if v.Secret != nil {
				secrets = append(secrets, v.Secret.SecretName)
			}
		}
		if len(secrets) != 1 || secrets[0] != deploy.SecretName(member) {
			t.Fatalf("%s mounts Secrets %v", ss.Name, secrets)
		}
		// Members never share a node; the rule exempts only the member's own pods.
		aff := pod.Affinity.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		if len(aff) != 1 || aff[0].TopologyKey != "kubernetes.io/hostname" {
			t.Fatalf("%s: anti-affinity %+v", ss.Name, aff)
		}
		sel, err := metav1.LabelSelectorAsSelector(aff[0].LabelSelector)
		if err != nil {
			t.Fatal(err)
		}
		for _, other := range r.stateful {
			theirs := other.Spec.Template.Labels["idface.io/member"]
			if sel.Matches(labels.Set(other.Spec.Template.Labels)) != (theirs != member) {
				t.Fatalf("%s's anti-affinity and %s's pods: matches %v", ss.Name, other.Name, theirs != member)
			}
		}
		if budget, err := metav1.LabelSelectorAsSelector(r.budgets[0].Spec.Selector); err != nil || !budget.Matches(labels.Set(ss.Spec.Template.Labels)) {
			t.Fatalf("the budget does not cover %s's pods", ss.Name)
		}
		sets = append(sets, ss)
	}
	// No set's selector picks another set's pods (a StatefulSet would
	// adopt them).
	for _, a := range sets {
		for _, b := range sets {
			if a.Name != b.Name && labels.SelectorFromSet(a.Spec.Selector.MatchLabels).Matches(labels.Set(b.Spec.Template.Labels)) {
				t.Fatalf("%s's selector picks %s's pods", a.Name, b.Name)
			}
		}
	}
}
