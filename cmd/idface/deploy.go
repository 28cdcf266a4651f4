package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/idface/idface/cluster"
	"github.com/idface/idface/config"
	"github.com/idface/idface/deploy"
	"github.com/idface/idface/host/home"
	"github.com/idface/idface/internal/codec/buildinfo"
	"github.com/idface/idface/internal/codec/store"
	"github.com/idface/idface/modes"
	"github.com/idface/idface/server"
)

func init() {
	register("deploy", "render what runs the servers elsewhere: Kubernetes manifests, the OCI image", cmdDeploy)
}

func cmdDeploy(args []string, stdout, stderr io.Writer) error {
	return group("deploy", []subcommand{
		{"k8s", "Kubernetes manifests for a cluster's servers (docs/DEPLOY.md, \"Kubernetes\")", deployK8s},
		{"image", "the OCI image the manifests run: a static idface FROM scratch, built offline", deployImage},
	}, args, stdout, stderr)
}

// imageRef is the default image reference: idface at this build's version.
func imageRef() string {
	v := buildinfo.Read().Version
	if v == "" || v == "(devel)" || v == "devel" {
		v = "dev"
	}
	return "idface:" + v
}

func deployK8s(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("deploy k8s", "idface deploy k8s --config cluster.json [--home DIR] [flags]\nidface deploy k8s --cluster DIR [flags]\n\n"+
		"Writes the Kubernetes objects that run the cluster's servers, as YAML\n"+
		"(kubectl apply --server-side -f, in a namespace that exists: the output\n"+
		"says how): per server a StatefulSet (its pod installs the\n"+
		"server's home from its Secret onto memory and keeps its data on its own\n"+
		"volume; pods of different servers never share a node), a headless\n"+
		"Service, and (all servers rendered) one PodDisruptionBudget; the\n"+
		"configuration as a ConfigMap. With --home, only that server, with its\n"+
		"Secret (each organisation renders its own); with --config alone, every\n"+
		"server and no Secret (each operator creates its own, as the output\n"+
		"says); with --cluster, a test cluster made by 'cluster init --k8s NS',\n"+
		"Secrets of every server included. Probes use /healthz on port 9465;\n"+
		"--metrics also serves /metrics on 9464, to Prometheus only. Pods are\n"+
		"replaced only when deleted: move one server at a time (docs/DEPLOY.md).\n\n"+
		"--image must name a registry (REGISTRY/idface:TAG) that the nodes pull\n"+
		"from: an image without one, such as the default, is refused unless\n"+
		"--allow-unpinned (warned on stderr); one without a digest (@sha256:...)\n"+
		"is warned of, a tag being movable. 'idface deploy image' prints the\n"+
		"manifest digest to pin.", stderr)
	dir := clusterDirFlag(fs, "a local test cluster made with 'cluster init --k8s NAMESPACE' (every server, every key)")
	cfgFile := fs.String("config", "", "the cluster configuration")
	homeDir := fs.String("home", "", "with --config: render only this server, its home as its Secret")
	ns := fs.String("namespace", "", "the namespace (default: the test cluster's, or idface)")
	image := fs.String("image", imageRef(), "the image the pods run ('idface deploy image' builds it): REGISTRY/idface:TAG, best pinned as REGISTRY/idface@sha256:DIGEST")
	unpinned := fs.Bool("allow-unpinned", false, "render an --image that names no registry (the default "+imageRef()+" among them: only nodes that have it loaded, as kind load or ctr import do, can run it)")
	rows := fs.Int("rows", 0, "size each row-holding server's volume and memory for this many rows (the mode's storage estimate)")
	disk := fs.String("disk", "10Gi", "each server's data volume (with --rows: the servers that hold no rows)")
	memory := fs.String("memory", defaultMemory, "each server's memory request (with --rows: the servers that hold no rows; a row-holding server needs about the mode's bytes per row times its rows: give --rows)")
	class := fs.String("storage-class", "", "the volumes' storage class (default: the Kubernetes cluster's)")
	metrics := fs.Bool("metrics", false, "also serve /metrics on port 9464, with a NetworkPolicy that lets only pods labelled app.kubernetes.io/name=prometheus reach it (row and answer counts); probes use /healthz on 9465 either way")
	expose := fs.Bool("expose", false, "also a LoadBalancer Service per server for clients outside the Kubernetes cluster (its advertised address must be the load balancer's)")
	out := fs.String("out", "", "write to this file (mode 0600 when it holds a Secret) instead of standard output")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkImage(*image, *unpinned, stderr); err != nil {
		return err
	}
	o := deploy.Options{Namespace: *ns, Image: *image, Disk: *disk, Memory: *memory, StorageClass: *class, Expose: *expose, Metrics: *metrics, Homes: map[string]map[string][]byte{}}
	p, path, err := k8sSource(*dir, *cfgFile, *homeDir, &o)
	if err != nil {
		return err
	}
	cfgJSON, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if *rows == 0 {
		fmt.Fprintf(stderr, "note: no --rows: every server requests %s of memory and a %s volume; a server that holds rows needs more as they grow: give --rows N (the rows you plan) to size them from the mode's bytes per row\n", *memory, *disk)
	}
	if *rows > 0 {
		if o.Sizes, err = k8sSizes(p, *rows); err != nil {
			return err
		}
	}
	b, err := deploy.K8s(p, cfgJSON, o)
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = stdout.Write(b)
		return err
	}
	return writeK8s(*out, b, o, stdout)
}

// k8sSource loads the configuration to render (from a test cluster's
// directory dir, or from cfgFile) and the file it was read from, and adds
// to o the homes to render as Secrets (every server's of a test cluster,
// or the one of homeDir) and the test cluster's namespace.
func k8sSource(dir, cfgFile, homeDir string, o *deploy.Options) (*config.Params, string, error) {
	switch {
	case dir != "" && cfgFile == "" && homeDir == "":
		p, err := config.Load(dir)
		if err != nil {
			return nil, "", err
		}
		for _, m := range p.Servers() {
			files, err := homeFiles(p, cluster.HomeDir(dir, m.Name))
			if err != nil {
				return nil, "", err
			}
			o.Homes[m.Name] = files
			if o.Namespace == "" {
				o.Namespace = namespaceOf(m.Addr)
			}
		}
		return p, p.Dir() + "/" + config.File, nil
	case cfgFile != "" && dir == "":
		p, err := config.LoadFile(cfgFile)
		if err != nil {
			return nil, "", err
		}
		if homeDir != "" {
			files, err := homeFiles(p, homeDir)
			if err != nil {
				return nil, "", err
			}
			h, _ := home.Open(homeDir)
			o.Members, o.Homes[h.Self.Name] = []string{h.Self.Name}, files
		}
		return p, cfgFile, nil
	}
	return nil, "", errors.New("give --config FILE (with --home DIR for one server) or --cluster DIR")
}

// k8sSizes sizes each row-holding server for rows, from the mode's
// storage estimate.
func k8sSizes(p *config.Params, rows int) (map[string]deploy.Size, error) {
	mode, err := modes.Of(p)
	if err != nil {
		return nil, err
	}
	per := mode.Storage(p, rows)
	sizes := map[string]deploy.Size{}
	for _, m := range p.Parties() {
		// The log holds the rows once more than memory does, and
		// grows until compacted: twice the rows, at least 1 GiB.
		sizes[m.Name] = deploy.Size{Disk: gib(max(2*per, 1<<30)), Memory: gib(1.25*per + 512<<20)}
	}
	return sizes, nil
}

// writeK8s writes the rendered objects b to out (0600 when they hold a
// Secret) and says how to apply them.
func writeK8s(out string, b []byte, o deploy.Options, stdout io.Writer) error {
	mode := os.FileMode(0o644)
	if len(o.Homes) > 0 {
		mode = 0o600
	}
	if err := store.WriteFile(out, b, mode); err != nil { // a new file: an old one's mode does not stay
		return err
	}
	namespace := o.Namespace
	if namespace == "" {
		namespace = deploy.DefaultNamespace
	}
	fmt.Fprintf(stdout, "wrote %s (%d bytes); %s\n", out, len(b), deploy.ApplyRecipe(namespace, out))
	return nil
}

// checkImage refuses an image reference that names no registry (no node
// pulls it: the default idface:VERSION is such a local name) unless
// unpinned, then warns; a reference without a digest is warned of.
func checkImage(ref string, unpinned bool, stderr io.Writer) error {
	name, digest := ref, ""
	if at := strings.Index(ref, "@"); at >= 0 {
		name, digest = ref[:at], ref[at+1:]
	}
	first, _, hasPath := strings.Cut(name, "/")
	registry := hasPath && (strings.ContainsAny(first, ".:") || first == "localhost")
	switch {
	case !registry && !unpinned:
		return fmt.Errorf("--image %s names no registry, so no node can pull it (%s is the local name 'deploy image' gives by default): push the image ('idface deploy image --out DIR', then skopeo copy oci:DIR docker://REGISTRY/idface:TAG) and give --image REGISTRY/idface@sha256:DIGEST (the manifest digest deploy image prints), or --allow-unpinned for nodes that have the image loaded (kind load, ctr image import)", ref, imageRef())
	case !registry:
		fmt.Fprintf(stderr, "idface deploy k8s: WARNING: --image %s names no registry: the pods start only on nodes that have this image loaded (--allow-unpinned)\n", ref)
	case !strings.HasPrefix(digest, "sha256:"):
		fmt.Fprintf(stderr, "idface deploy k8s: warning: --image %s has no digest: the tag can be moved to another image; pin it as %s@sha256:DIGEST (deploy image prints the manifest digest)\n", ref, name)
	}
	return nil
}

// homeFiles are a server's home files for its Secret, after the checks its
// pod's 'party install' will make: the configuration pins its certificate,
// its key pair and seal key are the ones its descriptor names.
func homeFiles(p *config.Params, dir string) (map[string][]byte, error) {
	h, err := home.Open(dir)
	if err != nil {
		return nil, err
	}
	if _, err := h.Check(p); err != nil {
		return nil, err
	}
	if _, ok := p.Server(h.Self.Name); !ok {
		return nil, fmt.Errorf("%s is a client: only servers run in Kubernetes", h.Self.Name)
	}
	if _, err := h.Certificate(); err != nil {
		return nil, err
	}
	if _, err := server.WithShardKey(p, h, h.Self.Name); err != nil { // a helper's Secret never carries the shard key
		return nil, err
	}
	if _, err := h.SealKey(); err != nil {
		return nil, err
	}
	return home.Files(dir)
}

// defaultMemory is a server's memory request when neither --memory nor
// --rows says: enough for a server that holds no rows (a decider, a key
// server) or a small test cluster's.
const defaultMemory = "512Mi"

// gib writes bytes as whole GiB, rounded up.
func gib(bytes float64) string {
	return fmt.Sprintf("%dGi", int64((bytes+(1<<30)-1)/(1<<30)))
}

// namespaceOf reads the namespace out of a pod address
// (NAME-0.NAME.NS.svc.cluster.local:PORT), "" if it is not one.
func namespaceOf(addr string) string {
	host, _, _ := strings.Cut(addr, ":")
	parts := strings.Split(host, ".")
	if len(parts) == 6 && parts[3] == "svc" {
		return parts[2]
	}
	return ""
}

func deployImage(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("deploy image", "idface deploy image --binary FILE --out DIR|FILE.tar [--ref idface:VERSION]\n\n"+
		"Builds the OCI image that 'deploy k8s' runs, offline: one layer with the\n"+
		"static executable at /idface, FROM scratch, user 65532, entry point\n"+
		"/idface. The same binary always gives the same image. Build the binary\n"+
		"first: CGO_ENABLED=0 go build -trimpath -o idface ./cmd/idface\n"+
		"--out DIR writes an OCI layout (skopeo copy oci:DIR docker://REGISTRY/idface:TAG);\n"+
		"--out FILE.tar an OCI archive (podman load -i FILE.tar; ctr image import FILE.tar).\n"+
		"With a Docker engine, deploy/Dockerfile builds the same from source.", stderr)
	bin := fs.String("binary", "", "a static idface executable (default: this one, if it is static)")
	out := fs.String("out", "", "an OCI layout directory to create, or FILE.tar for an OCI archive")
	ref := fs.String("ref", imageRef(), "the image's name and tag")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := required(fs, "out"); err != nil {
		return err
	}
	path := *bin
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		path = exe
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	o := deploy.ImageOptions{Ref: *ref}
	// Compressing the layer takes a while (about 20 s for a 40 MB binary
	// on two cores): say what is happening before, and when it is done.
	fmt.Fprintf(stderr, "packing %s (%.0f MB) into one gzip-compressed layer, then %s...\n", path, float64(len(b))/1e6, *out)
	start := time.Now()
	var manifest string
	if strings.HasSuffix(*out, ".tar") {
		var archive []byte
		if archive, manifest, err = deploy.ImageTar(b, o); err == nil {
			err = store.WriteFile(*out, archive, 0o644)
		}
	} else {
		manifest, err = deploy.Image(*out, b, o)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	fmt.Fprintf(stderr, "packed in %.1f s\n", time.Since(start).Seconds())
	fmt.Fprintf(stdout, "%s: %s (manifest %s)\n", *out, *ref, manifest)
	return nil
}
