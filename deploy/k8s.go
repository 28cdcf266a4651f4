// Package deploy places a cluster's servers with engines that exist
// rather than home-made ones: Kubernetes manifests (K8s) and the OCI image
// they run (Image). It only renders files; nothing here talks to a
// Kubernetes cluster or a registry.
//
// The manifests keep the trust model of a deployment across hosts: each
// server's home (its private keys) is its own Secret, mounted only by its
// own pods, copied by 'idface party install' onto memory; its data live on
// its own volume; pods of different members never share a node (a node's
// root sees one member's shares, not two). docs/DEPLOY.md, "Kubernetes".
package deploy

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/idface/idface/config"
)

// Fixed places inside a pod.
const (
	// QUICPort is where a server listens in its pod, and the port of the
	// addresses PodAddress gives.
	QUICPort = 7443
	// MetricsPort serves /metrics (and /healthz) inside the cluster
	// network when asked for (Options.Metrics).
	MetricsPort = 9464
	// HealthPort serves /healthz alone, to the kubelet's probes.
	HealthPort = 9465
	// maxMember keeps every name made from a member within Kubernetes'
	// limits: a StatefulSet's name has at most 52 characters (its pods'
	// controller-revision-hash label adds 11 to 63).
	maxMember = 52 - len("idface-")
	// UID runs every container (no root: the image has no user database).
	UID = 65532

	binary      = "/idface"
	secretDir   = "/etc/idface/secret"
	homeDir     = "/run/idface/home" // memory (emptyDir medium Memory)
	configDir   = "/etc/idface/cluster"
	dataMount   = "/var/lib/idface"
	dataDir     = dataMount + "/data"
	labelName   = "app.kubernetes.io/name"
	labelPart   = "app.kubernetes.io/part-of"
	labelClust  = "idface.io/cluster"
	labelMember = "idface.io/member"
	labelRole   = "idface.io/role"
	// labelSet tells a sharded member's two StatefulSets apart: its
	// coordinator and its shards.
	labelSet = "idface.io/set"
)

// Options of K8s.
type Options struct {
	// Namespace of every object (default DefaultNamespace).
	Namespace string
	// Image is the OCI image reference the pods run (see Image).
	Image string
	// Members are the servers to render (default: every server).
	Members []string
	// Homes holds the files of the rendered members' homes, by member and
	// file name, to render as their Secrets; a member without one gets
	// none (its operator creates it: 'kubectl create secret generic').
	Homes map[string]map[string][]byte
	// Disk is each member's data volume request (default 10Gi); Memory,
	// when set, its memory request. Sizes overrides both per member.
	Disk, Memory string
	Sizes        map[string]Size
	// StorageClass names the volumes' class ("" is the cluster's default).
	StorageClass string
	// Expose adds a LoadBalancer Service per member for clients outside
	// the Kubernetes cluster (the member's advertised address must then
	// be that load balancer's).
	Expose bool
	// Metrics serves /metrics on MetricsPort (row counts and answer
	// counts), with a NetworkPolicy that admits only Prometheus's pods
	// there; /healthz alone is on HealthPort either way.
	Metrics bool

	configHash string // of the configuration, on every pod: a new one shows
}

// Size is a member's data volume and memory requests (Kubernetes
// quantities; "" keeps Options' value).
type Size struct{ Disk, Memory string }

// Name is the StatefulSet, headless Service, Secret and volume prefix of
// member.
func Name(member string) string { return "idface-" + member }

// DefaultNamespace is the objects' namespace unless Options name one.
const DefaultNamespace = "idface"

// ApplyRecipe says how to apply a rendered file in namespace ns: the
// namespace first (once: the objects do not create it), then a
// server-side apply.
func ApplyRecipe(ns, file string) string {
	return fmt.Sprintf("apply with: kubectl create namespace %s (once; it may exist already), then kubectl apply --server-side -f %s", ns, file)
}

// SecretName is member's home Secret.
func SecretName(member string) string { return Name(member) + "-home" }

// ShardSet is the StatefulSet and headless Service of a sharded member's
// shards: its pod s runs shard s.
func ShardSet(member string) string { return Name(member) + "-shard" }

// ShardPodAddress is the address of member's shard s inside the
// Kubernetes cluster, in namespace ns ('cluster init --k8s --shards').
func ShardPodAddress(ns, member string, s int) string {
	return net.JoinHostPort(fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local", ShardSet(member), s, ShardSet(member), ns), strconv.Itoa(QUICPort))
}

// PodAddress is the address member's first pod has inside the Kubernetes
// cluster, in namespace ns: what its descriptor advertises when its peers
// and clients run in the same Kubernetes cluster ('party init --advertise',
// 'cluster init --k8s').
func PodAddress(ns, member string) string {
	return net.JoinHostPort(fmt.Sprintf("%s-0.%s.%s.svc.cluster.local", Name(member), Name(member), ns), strconv.Itoa(QUICPort))
}

// K8s renders the Kubernetes objects that run the servers of the cluster
// whose configuration is p (cfgJSON, its file, goes into a ConfigMap), as
// one YAML stream.
func K8s(p *config.Params, cfgJSON []byte, o Options) ([]byte, error) {
	members, err := o.check(p)
	if err != nil {
		return nil, err
	}
	id := p.ClusterID()
	cluster := hex.EncodeToString(id[:])
	docs := []any{configMap(o.Namespace, cluster, cfgJSON)}
	sum := sha256.Sum256(cfgJSON)
	o.configHash = hex.EncodeToString(sum[:8])
	for _, name := range members {
		d, err := memberDocs(p, o, name, cluster)
		if err != nil {
			return nil, err
		}
		docs = append(docs, d...)
	}
	if len(members) == len(p.Servers()) {
		// Only over the whole cluster: a pod under two budgets cannot be
		// evicted at all, and one server's own budget protects nothing.
		docs = append(docs, disruptionBudget(o.Namespace, cluster, members))
	}
	return render(p, o, cluster, members, docs)
}

// check fills o's defaults, checks it against p and returns the members
// to render.
func (o *Options) check(p *config.Params) ([]string, error) {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.Image == "" {
		return nil, fmt.Errorf("name the image the pods run (--image; 'idface deploy image' builds one)")
	}
	if o.Disk == "" {
		o.Disk = "10Gi"
	}
	qs := []struct{ flag, v string }{{"disk", o.Disk}, {"memory", o.Memory}}
	for _, z := range o.Sizes {
		qs = append(qs, struct{ flag, v string }{"disk", z.Disk}, struct{ flag, v string }{"memory", z.Memory})
	}
	for _, q := range qs {
		if q.v != "" && !quantity(q.v) {
			return nil, fmt.Errorf("--%s %q: want a Kubernetes quantity such as 20Gi or 512Mi", q.flag, q.v)
		}
	}
	if err := DNSLabel(o.Namespace); err != nil {
		return nil, fmt.Errorf("namespace: %w", err)
	}
	members := o.Members
	if len(members) == 0 {
		for _, m := range p.Servers() {
			members = append(members, m.Name)
		}
	}
	for name := range o.Homes {
		if !slices.Contains(members, name) {
			return nil, fmt.Errorf("a home is given for %s, which is not rendered", name)
		}
	}
	return members, nil
}

// memberDocs are the objects of one member: its home's Secret where
// given, and per pod set (in a sharded cluster its coordinator, with no
// rows and a scratch data directory, and its S shards, each with its own
// volume) the headless Service, the exposed one, the StatefulSet and the
// metrics policy.
func memberDocs(p *config.Params, o Options, name, cluster string) ([]any, error) {
	m, ok := p.Server(name)
	if !ok {
		return nil, fmt.Errorf("%s is not a server of this cluster (servers: %s)", name, serverNames(p))
	}
	longest := maxMember
	if p.Shards() > 1 {
		longest -= len("-shard")
	}
	if err := DNSLabel(name); err != nil || len(name) > longest {
		return nil, fmt.Errorf("member %q: Kubernetes names its objects after it, so it must be a DNS label of at most %d characters (lower-case letters, digits, '-' inside): assemble the cluster with members so named", name, longest)
	}
	port, err := quicPort(m, o.Namespace)
	if err != nil {
		return nil, err
	}
	shardPort, err := shardPort(p, m, o.Namespace)
	if err != nil {
		return nil, err
	}
	var docs []any
	labels := map[string]string{labelName: "idface", labelPart: "idface-" + cluster[:8], labelClust: cluster, labelMember: name, labelRole: p.Role(name)}
	if files, ok := o.Homes[name]; ok {
		s, err := secret(o.Namespace, name, labels, files, m)
		if err != nil {
			return nil, err
		}
		docs = append(docs, s)
	}
	sets := []podSet{{}}
	if p.Shards() > 1 {
		sets = []podSet{{label: "coordinator", noData: true}, {label: "shards", suffix: "-shard", replicas: p.Shards()}}
	}
	for _, set := range sets {
		l, port := withSet(labels, set.label), port
		if set.replicas > 0 {
			port = shardPort
		}
		docs = append(docs, headlessSet(o.Namespace, Name(name)+set.suffix, l, port, o.Metrics))
		if o.Expose && set.replicas == 0 { // clients reach the coordinator
			docs = append(docs, exposed(o.Namespace, name, l, port))
		}
		docs = append(docs, statefulSet(p, o, name, cluster, labels, port, set))
		if o.Metrics {
			docs = append(docs, metricsPolicy(o.Namespace, Name(name)+set.suffix, l, port))
		}
	}
	return docs, nil
}

// render writes the documents as one YAML stream behind a header that
// says how to apply it and which Secrets each member's operator makes.
func render(p *config.Params, o Options, cluster string, members []string, docs []any) ([]byte, error) {
	var out bytes.Buffer
	fmt.Fprintf(&out, "# idface cluster %s (mode %s, serial %d): %s in namespace %s.\n", cluster, p.Mode(), p.Serial(), strings.Join(members, ", "), o.Namespace)
	// The objects name their namespace but do not make it (an
	// organisation's may hold other things, which deleting this file
	// must not remove); server-side apply, as a configuration of
	// hundreds of clients is larger than client-side apply's annotation.
	fmt.Fprintf(&out, "# %s\n", ApplyRecipe(o.Namespace, "FILE"))
	var missing []string
	for _, name := range members {
		if _, ok := o.Homes[name]; !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(&out, "# Each member's home Secret is made by its own operator, on the host of its home, before applying:\n")
		for _, name := range missing {
			fmt.Fprintf(&out, "#   kubectl -n %s create secret generic %s --from-file=HOME/home.json --from-file=HOME/identity.key --from-file=HOME/identity.crt --from-file=HOME/seal.key --from-file=HOME/%s.pub.json\n", o.Namespace, SecretName(name), name)
			fmt.Fprintf(&out, "#     (during a key rotation also --from-file= each of identity.key.previous, identity.next.key, identity.next.crt the home holds)\n")
		}
	}
	if len(o.Homes) > 1 {
		fmt.Fprintf(&out, "# This file holds the private keys of %d members: a test cluster only. Members of a deployment each render their own.\n", len(o.Homes))
	}
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(b)
	}
	return out.Bytes(), nil
}

func serverNames(p *config.Params) string {
	var s []string
	for _, m := range p.Servers() {
		s = append(s, m.Name)
	}
	return strings.Join(s, ", ")
}

// shardPort is the port every shard of a sharded member listens on in its
// pod (one pod template): its shard addresses must share it, and name the
// pods of ShardSet when they are pod names.
func shardPort(p *config.Params, m config.Member, ns string) (int, error) {
	if p.Shards() == 1 {
		return 0, nil
	}
	port := 0
	for s, a := range m.Shards {
		host, ps, err := net.SplitHostPort(a)
		if err != nil {
			return 0, fmt.Errorf("%s's shard %d address %q: %w", m.Name, s, a, err)
		}
		if want := ShardPodAddress(ns, m.Name, s); strings.HasSuffix(host, ".svc.cluster.local") && a != want {
			return 0, fmt.Errorf("%s's shard %d is %s, but its pod in namespace %s is %s: render it into the namespace its addresses name", m.Name, s, a, ns, want)
		}
		if ip := net.ParseIP(host); ip != nil && (ip.IsLoopback() || ip.IsUnspecified()) {
			return 0, fmt.Errorf("%s's shard %d advertises %s, an address no pod can dial: make the cluster with 'idface cluster init --k8s NAMESPACE --shards N'", m.Name, s, a)
		}
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 || s > 0 && n != port {
			return 0, fmt.Errorf("%s's shard addresses must share one port (its shards run one pod template): %q", m.Name, a)
		}
		port = n
	}
	return port, nil
}

// quicPort is the port of member m's advertised address: its pod listens
// there, so that the address the others dial reaches it through the
// headless Service (or a load balancer that keeps the port).
func quicPort(m config.Member, ns string) (int, error) {
	host, port, err := net.SplitHostPort(m.Addr)
	if err != nil {
		return 0, fmt.Errorf("%s's address %q: %w", m.Name, m.Addr, err)
	}
	if want := PodAddress(ns, m.Name); strings.HasSuffix(host, ".svc.cluster.local") && m.Addr != want {
		return 0, fmt.Errorf("%s advertises %s, but its pod in namespace %s is %s: render it into the namespace its address names (--namespace), or make the cluster for this one", m.Name, m.Addr, ns, want)
	}
	if ip := net.ParseIP(host); ip != nil && (ip.IsLoopback() || ip.IsUnspecified()) {
		return 0, fmt.Errorf("%s advertises %s, an address no pod can dial: make its home with 'idface party init --listen 0.0.0.0:%d --advertise ADDRESS' (in one Kubernetes cluster, ADDRESS is %s), or a test cluster with 'idface cluster init --k8s NAMESPACE'",
			m.Name, m.Addr, QUICPort, PodAddress("NAMESPACE", m.Name))
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return 0, fmt.Errorf("%s's address %q: bad port", m.Name, m.Addr)
	}
	return n, nil
}

// The objects, as their JSON (sigs.k8s.io/yaml writes them as YAML). Only
// the fields rendered here; the tests decode every one strictly into the
// k8s.io/api types.

type object struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   meta   `json:"metadata"`
}

type meta struct {
	Name        string            `json:"name"`
	Namespace   string            `json:"namespace,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type selector struct {
	MatchLabels      map[string]string `json:"matchLabels,omitempty"`
	MatchExpressions []requirement     `json:"matchExpressions,omitempty"`
}

type requirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// configName is the cluster's ConfigMap: one per cluster, so that two
// clusters in one namespace keep their own configurations.
func configName(cluster string) string { return "idface-cluster-" + cluster[:8] }

func configMap(ns, cluster string, cfgJSON []byte) any {
	return struct {
		object
		Data map[string]string `json:"data"`
	}{object{"v1", "ConfigMap", meta{Name: configName(cluster), Namespace: ns, Labels: map[string]string{labelName: "idface", labelClust: cluster}}},
		map[string]string{config.File: string(cfgJSON)}}
}

// secret is member's home: the files 'idface party install' copies, no
// data. Each must belong to this member: a Secret with another member's
// home (or none of its certificate) is refused before it is written.
func secret(ns, name string, labels map[string]string, files map[string][]byte, m config.Member) (any, error) {
	var self struct {
		Name string `json:"name"`
		Pin  string `json:"pin"`
	}
	if err := json.Unmarshal(files["home.json"], &self); err != nil {
		return nil, fmt.Errorf("%s's home.json: %w", name, err)
	}
	if self.Name != name || !slices.Contains(m.Pins(), self.Pin) {
		return nil, fmt.Errorf("the home given for %s is %s's (pin %s), not the one the configuration pins", name, self.Name, self.Pin)
	}
	for _, need := range []string{"identity.key", "identity.crt"} {
		if len(files[need]) == 0 {
			return nil, fmt.Errorf("%s's home lacks %s", name, need)
		}
	}
	data := map[string][]byte{}
	for f, b := range files {
		data[f] = b
	}
	return struct {
		object
		Type string            `json:"type"`
		Data map[string][]byte `json:"data"` // base64, as Kubernetes wants
	}{object{"v1", "Secret", meta{Name: SecretName(name), Namespace: ns, Labels: labels}}, "Opaque", data}, nil
}

type servicePort struct {
	Name       string `json:"name"`
	Protocol   string `json:"protocol"`
	Port       int    `json:"port"`
	TargetPort string `json:"targetPort,omitempty"`
}

type serviceSpec struct {
	Type      string            `json:"type,omitempty"`
	ClusterIP string            `json:"clusterIP,omitempty"`
	Selector  map[string]string `json:"selector"`
	Ports     []servicePort     `json:"ports"`
	// The others dial a member as soon as it listens; its DNS name must
	// not wait for readiness.
	PublishNotReady bool `json:"publishNotReadyAddresses,omitempty"`
}

// headlessSet is the headless Service svc of the pods labels select: it
// gives each of them a stable DNS name (PodAddress, ShardPodAddress), for
// the others and for clients in the same cluster.
func headlessSet(ns, svc string, labels map[string]string, port int, metrics bool) any {
	ports := []servicePort{{Name: "quic", Protocol: "UDP", Port: port, TargetPort: "quic"}}
	if metrics {
		ports = append(ports, servicePort{Name: "metrics", Protocol: "TCP", Port: MetricsPort, TargetPort: "metrics"})
	}
	return struct {
		object
		Spec serviceSpec `json:"spec"`
	}{object{"v1", "Service", meta{Name: svc, Namespace: ns, Labels: labels}},
		serviceSpec{ClusterIP: "None", Selector: podSelector(labels), PublishNotReady: true, Ports: ports}}
}

// exposed is a load balancer for clients outside the cluster: QUIC only.
func exposed(ns, name string, labels map[string]string, port int) any {
	return struct {
		object
		Spec serviceSpec `json:"spec"`
	}{object{"v1", "Service", meta{Name: Name(name) + "-public", Namespace: ns, Labels: labels}},
		serviceSpec{Type: "LoadBalancer", Selector: podSelector(labels), Ports: []servicePort{{Name: "quic", Protocol: "UDP", Port: port, TargetPort: "quic"}}}}
}

// metricsPolicy lets only pods labelled app.kubernetes.io/name=prometheus
// (in any namespace) read a member's /metrics; its QUIC port and /healthz
// stay open (peers, clients, the kubelet's probes). Metrics count rows
// and answers: nothing else in the cluster network needs them.
func metricsPolicy(ns, set string, labels map[string]string, port int) any {
	type peer struct {
		PodSelector       selector  `json:"podSelector"`
		NamespaceSelector *selector `json:"namespaceSelector,omitempty"`
	}
	type policyPort struct {
		Protocol string `json:"protocol"`
		Port     int    `json:"port"`
	}
	type rule struct {
		From  []peer       `json:"from,omitempty"`
		Ports []policyPort `json:"ports"`
	}
	type policy struct {
		PodSelector selector `json:"podSelector"`
		PolicyTypes []string `json:"policyTypes"`
		Ingress     []rule   `json:"ingress"`
	}
	return struct {
		object
		Spec policy `json:"spec"`
	}{object{"networking.k8s.io/v1", "NetworkPolicy", meta{Name: set + "-metrics", Namespace: ns, Labels: labels}},
		policy{selector{MatchLabels: podSelector(labels)}, []string{"Ingress"}, []rule{
			{Ports: []policyPort{{"UDP", port}, {"TCP", HealthPort}}},
			{From: []peer{{PodSelector: selector{MatchLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}}, NamespaceSelector: &selector{}}},
				Ports: []policyPort{{"TCP", MetricsPort}}},
		}}}
}

// podSelector picks a member's pods (of one set, when labels name it).
func podSelector(labels map[string]string) map[string]string {
	sel := map[string]string{labelClust: labels[labelClust], labelMember: labels[labelMember]}
	if set, ok := labels[labelSet]; ok {
		sel[labelSet] = set
	}
	return sel
}

// withSet is labels with a set's label.
func withSet(labels map[string]string, set string) map[string]string {
	l := maps.Clone(labels)
	if set != "" {
		l[labelSet] = set
	}
	return l
}

// podSet is one StatefulSet of a member: the member's single pod (zero
// value), or in a sharded cluster its coordinator or its shards.
type podSet struct {
	label    string // labelSet's value; "" outside shards
	suffix   string // of the set's name
	replicas int    // 1 when 0; a shard set's pod s runs shard s
	noData   bool   // a coordinator: its data directory holds only a lock
}

// disruptionBudget lets a voluntary disruption (a node drain, an upgrade)
// take at most one of the rendered members' pods at a time: the
// replicated mode answers with one holder down, not two; the n-of-n modes
// are down while any member moves, and two at once only lengthen that.
func disruptionBudget(ns, cluster string, members []string) any {
	name := "idface-" + cluster[:8]
	type budget struct {
		MaxUnavailable int      `json:"maxUnavailable"`
		Selector       selector `json:"selector"`
	}
	return struct {
		object
		Spec budget `json:"spec"`
	}{object{"policy/v1", "PodDisruptionBudget", meta{Name: name, Namespace: ns, Labels: map[string]string{labelName: "idface", labelClust: cluster}}},
		budget{1, selector{MatchLabels: map[string]string{labelClust: cluster}, MatchExpressions: []requirement{{Key: labelMember, Operator: "In", Values: sorted(members)}}}}}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

// statefulSet runs member name: one pod (one per shard when a party is
// sharded), its home installed from its Secret onto memory, its data on
// its own volume, never on a node with another member of the cluster.
func statefulSet(p *config.Params, o Options, name, cluster string, labels map[string]string, port int, set podSet) any {
	labels = withSet(labels, set.label)
	grace := int((p.Timeouts().Shutdown + 10*time.Second) / time.Second)
	probe := func(period, failures int) map[string]any {
		return map[string]any{"httpGet": map[string]any{"path": "/healthz", "port": "health"}, "periodSeconds": period, "failureThreshold": failures, "timeoutSeconds": 2}
	}
	restricted := map[string]any{
		"allowPrivilegeEscalation": false,
		"readOnlyRootFilesystem":   true,
		"capabilities":             map[string]any{"drop": []string{"ALL"}},
	}
	volumeMounts := func(extra ...map[string]any) []map[string]any {
		return append([]map[string]any{{"name": "home", "mountPath": homeDir}}, extra...)
	}
	disk, memory := o.Disk, o.Memory
	if z, ok := o.Sizes[name]; ok {
		disk, memory = cmp.Or(z.Disk, disk), cmp.Or(z.Memory, memory)
	}
	resources := map[string]any{}
	if memory != "" {
		resources["requests"] = map[string]any{"memory": memory}
	}
	args, ports := serveCommand(o, port, set)
	volumes := []map[string]any{
		// 0440 with fsGroup: party install copies it to 0600.
		{"name": "secret", "secret": map[string]any{"secretName": SecretName(name), "defaultMode": 0o440}},
		{"name": "home", "emptyDir": map[string]any{"medium": "Memory", "sizeLimit": "16Mi"}},
		{"name": "cluster", "configMap": map[string]any{"name": configName(cluster)}},
	}
	if set.noData {
		volumes = append(volumes, map[string]any{"name": "data", "emptyDir": map[string]any{"sizeLimit": "16Mi"}})
	}
	pod := map[string]any{
		"metadata": map[string]any{"labels": labels, "annotations": map[string]string{"idface.io/config-hash": o.configHash}},
		"spec": map[string]any{
			"automountServiceAccountToken":  false, // a server never calls the Kubernetes API
			"enableServiceLinks":            false,
			"terminationGracePeriodSeconds": grace,
			"securityContext":               podSecurity(port),
			"affinity": map[string]any{"podAntiAffinity": map[string]any{
				"requiredDuringSchedulingIgnoredDuringExecution": []map[string]any{{
					"topologyKey": "kubernetes.io/hostname",
					"labelSelector": selector{MatchLabels: map[string]string{labelClust: cluster},
						MatchExpressions: []requirement{{Key: labelMember, Operator: "NotIn", Values: []string{name}}}},
					"namespaceSelector": selector{}, // members in other namespaces too
				}},
			}},
			"initContainers": []map[string]any{{
				"name": "install-home", "image": o.Image,
				"command":         []string{binary, "party", "install", "--from", secretDir, "--home", homeDir},
				"securityContext": restricted,
				"volumeMounts":    volumeMounts(map[string]any{"name": "secret", "mountPath": secretDir, "readOnly": true}),
			}},
			"containers": []map[string]any{{
				"name": "idface", "image": o.Image,
				"command": args,
				"ports":   ports,
				// Replaying a large log takes minutes: the startup probe
				// allows 30 before liveness applies.
				"startupProbe":    probe(5, 360),
				"readinessProbe":  probe(5, 2),
				"livenessProbe":   probe(10, 6),
				"resources":       resources,
				"securityContext": restricted,
				"volumeMounts": volumeMounts(
					map[string]any{"name": "cluster", "mountPath": configDir, "readOnly": true},
					map[string]any{"name": "data", "mountPath": dataMount}),
			}},
			"volumes": volumes,
		},
	}
	spec := map[string]any{
		"serviceName":         Name(name) + set.suffix,
		"replicas":            max(set.replicas, 1),
		"podManagementPolicy": "Parallel",
		// A new image or configuration replaces a pod only when it is
		// deleted: the operator moves one server at a time (DEPLOY.md),
		// never every member of the cluster at once.
		"updateStrategy": map[string]any{"type": "OnDelete"},
		"selector":       selector{MatchLabels: podSelector(labels)},
		"template":       pod,
	}
	if !set.noData {
		spec["volumeClaimTemplates"] = []map[string]any{dataClaim(o, labels, disk)}
	}
	return struct {
		object
		Spec map[string]any `json:"spec"`
	}{object{"apps/v1", "StatefulSet", meta{Name: Name(name) + set.suffix, Namespace: o.Namespace, Labels: labels}}, spec}
}

// serveCommand is the container's command, idface serve on port (its
// shard's ordinal from the pod's in a set of shards), and its ports.
func serveCommand(o Options, port int, set podSet) ([]string, []map[string]any) {
	args := []string{binary, "serve", "--config", configDir + "/" + config.File, "--home", homeDir, "--data", dataDir,
		"--listen", net.JoinHostPort("0.0.0.0", strconv.Itoa(port)), "--health-addr", net.JoinHostPort("0.0.0.0", strconv.Itoa(HealthPort))}
	if set.replicas > 0 {
		args = append(args, "--shard-ordinal") // pod s of the set is shard s
	}
	ports := []map[string]any{
		{"name": "quic", "containerPort": port, "protocol": "UDP"},
		{"name": "health", "containerPort": HealthPort, "protocol": "TCP"},
	}
	if o.Metrics {
		args = append(args, "--metrics-addr", net.JoinHostPort("0.0.0.0", strconv.Itoa(MetricsPort)))
		ports = append(ports, map[string]any{"name": "metrics", "containerPort": MetricsPort, "protocol": "TCP"})
	}
	return args, ports
}

// podSecurity is the pod's security context: never root, the runtime's
// seccomp profile, and the sysctl that lets it bind a port below 1024.
func podSecurity(port int) map[string]any {
	sc := map[string]any{
		"runAsNonRoot": true, "runAsUser": UID, "runAsGroup": UID, "fsGroup": UID,
		"fsGroupChangePolicy": "OnRootMismatch",
		"seccompProfile":      map[string]any{"type": "RuntimeDefault"},
	}
	if port < 1024 {
		// Without root or capabilities the server binds a low port only
		// where the pod's network namespace allows it (a safe sysctl).
		sc["sysctls"] = []map[string]any{{"name": "net.ipv4.ip_unprivileged_port_start", "value": strconv.Itoa(port)}}
	}
	return sc
}

// dataClaim is the claim of a pod's data volume of disk bytes.
func dataClaim(o Options, labels map[string]string, disk string) map[string]any {
	pvc := map[string]any{
		"metadata": map[string]any{"name": "data", "labels": podSelector(labels)},
		"spec": map[string]any{
			"accessModes": []string{"ReadWriteOnce"},
			"resources":   map[string]any{"requests": map[string]any{"storage": disk}},
		},
	}
	if o.StorageClass != "" {
		pvc["spec"].(map[string]any)["storageClassName"] = o.StorageClass
	}
	return pvc
}

// DNSLabel checks a name Kubernetes takes as a DNS label (RFC 1123).
func DNSLabel(s string) error {
	ok := len(s) > 0 && len(s) <= 63
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case c == '-' && i > 0 && i < len(s)-1:
		default:
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("%q is not a DNS label (lower-case letters and digits, '-' inside, at most 63 characters)", s)
	}
	return nil
}

// quantity accepts the Kubernetes quantities an operator writes for sizes:
// a positive number (digits, a decimal point allowed) with an optional
// binary or decimal suffix.
func quantity(s string) bool {
	i, nonzero, point := 0, false, false
	for ; i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.' && !point); i++ {
		point = point || s[i] == '.'
		nonzero = nonzero || s[i] >= '1' && s[i] <= '9'
	}
	if !nonzero || s[i-1] == '.' || s[0] == '.' {
		return false
	}
	switch s[i:] {
	case "", "Ki", "Mi", "Gi", "Ti", "Pi", "k", "M", "G", "T", "P":
		return true
	}
	return false
}
