package deploy_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/idface/idface/deploy"
)

// strictJSON decodes b into v, refusing fields v's type lacks.
func strictJSON(t *testing.T, what string, b []byte, v any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatalf("%s does not decode strictly into the OCI type: %v\n%s", what, err, b)
	}
}

// TestImage builds the image from a static idface, reads the layout back
// through the OCI image-spec types, checks every digest, that the only
// layer is /idface, that two builds are the same byte for byte, and, as
// root, runs the image's root file system (nothing but /idface) under
// chroot: FROM scratch works.
func TestImage(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "idface")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, "../cmd/idface")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	o := deploy.ImageOptions{Ref: "registry.example/idface:test"}
	dir := filepath.Join(t.TempDir(), "layout")
	manifestDigest, err := deploy.Image(dir, exe, o)
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	blob := func(d ocispec.Descriptor) []byte {
		b := read("blobs/sha256/" + d.Digest.Encoded())
		if int64(len(b)) != d.Size {
			t.Fatalf("blob %s: %d bytes, its descriptor says %d", d.Digest, len(b), d.Size)
		}
		if digestOf(b) != d.Digest.String() {
			t.Fatalf("blob %s has digest %s", d.Digest, digestOf(b))
		}
		return b
	}
	var layout ocispec.ImageLayout
	strictJSON(t, "oci-layout", read("oci-layout"), &layout)
	if layout.Version != ocispec.ImageLayoutVersion {
		t.Fatalf("layout version %q", layout.Version)
	}
	var index ocispec.Index
	strictJSON(t, "index.json", read("index.json"), &index)
	if index.MediaType != ocispec.MediaTypeImageIndex || len(index.Manifests) != 1 || index.Manifests[0].Digest.String() != manifestDigest ||
		index.Manifests[0].Annotations[ocispec.AnnotationRefName] != "test" || index.Manifests[0].Platform.OS != "linux" {
		t.Fatalf("index: %+v", index)
	}
	var man ocispec.Manifest
	strictJSON(t, "the manifest", blob(index.Manifests[0]), &man)
	if man.MediaType != ocispec.MediaTypeImageManifest || man.Config.MediaType != ocispec.MediaTypeImageConfig || len(man.Layers) != 1 || man.Layers[0].MediaType != ocispec.MediaTypeImageLayerGzip {
		t.Fatalf("manifest: %+v", man)
	}
	var cfg ocispec.Image
	strictJSON(t, "the config", blob(man.Config), &cfg)
	if cfg.OS != "linux" || cfg.Architecture != index.Manifests[0].Platform.Architecture || cfg.Config.User != "65532:65532" ||
		strings.Join(cfg.Config.Entrypoint, " ") != "/idface" || len(cfg.RootFS.DiffIDs) != 1 {
		t.Fatalf("config: %+v", cfg)
	}
	for _, p := range exposed(t) { // as deploy/Dockerfile's
		if _, ok := cfg.Config.ExposedPorts[p]; !ok || len(cfg.Config.ExposedPorts) != len(exposed(t)) {
			t.Fatalf("the image exposes %v; want %v as deploy/Dockerfile", cfg.Config.ExposedPorts, exposed(t))
		}
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob(man.Layers[0])))
	if err != nil {
		t.Fatal(err)
	}
	layerTar, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if digestOf(layerTar) != cfg.RootFS.DiffIDs[0].String() {
		t.Fatal("the layer's diff id is not the digest of its tar")
	}
	rootfs := t.TempDir()
	entries := untar(t, layerTar)
	if len(entries) != 1 || entries[0].Name != "idface" || entries[0].Mode != 0o755 || !bytes.Equal(entries[0].data, exe) {
		t.Fatalf("layer holds %d entries: want only idface, the binary, mode 0755", len(entries))
	}
	if err := os.WriteFile(filepath.Join(rootfs, "idface"), exe, 0o755); err != nil {
		t.Fatal(err)
	}

	// Reproducible: the same binary, the same image; the archive holds the
	// layout's files.
	again := filepath.Join(t.TempDir(), "layout")
	if d2, err := deploy.Image(again, exe, o); err != nil || d2 != manifestDigest {
		t.Fatalf("a second build: %s, %v (first %s)", d2, err, manifestDigest)
	}
	if _, err := deploy.Image(dir, exe, o); err == nil {
		t.Fatal("an existing layout was overwritten")
	}
	archive, d3, err := deploy.ImageTar(exe, o)
	if err != nil || d3 != manifestDigest {
		t.Fatalf("archive: %s %v", d3, err)
	}
	files := 0
	for _, e := range untar(t, archive) {
		if e.Typeflag == tar.TypeReg {
			if !bytes.Equal(e.data, read(e.Name)) {
				t.Fatalf("archive's %s differs from the layout's", e.Name)
			}
			files++
		}
	}
	if files != 5 {
		t.Fatalf("archive holds %d files, want 5", files)
	}

	// A dynamically linked executable, a static one that is not idface, or
	// not an executable at all, is refused.
	for _, bad := range [][]byte{[]byte("#!/bin/sh\n"), dynamic(t), otherStatic(t)} {
		if bad == nil {
			continue
		}
		if _, err := deploy.Image(filepath.Join(t.TempDir(), "x"), bad, o); err == nil {
			t.Error("a binary that cannot run FROM scratch was packed")
		}
	}

	// Run the root file system: nothing but /idface.
	if os.Geteuid() != 0 {
		t.Log("not root: the image's root file system is not run under chroot")
		return
	}
	run := exec.Command("/idface", "version")
	run.Dir = "/"
	run.Env = []string{}
	run.SysProcAttr = &syscall.SysProcAttr{Chroot: rootfs, Credential: &syscall.Credential{Uid: deploy.UID, Gid: deploy.UID}}
	out, err := run.CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "idface ") {
		t.Fatalf("/idface version in the image's root, as uid %d: %v\n%s", deploy.UID, err, out)
	}
}

type entry struct {
	*tar.Header
	data []byte
}

// untar reads a tar archive's entries.
func untar(t *testing.T, b []byte) []entry {
	t.Helper()
	var out []entry
	tr := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{h, data})
	}
}

// otherStatic is a static Go program that is not idface.
func otherStatic(t *testing.T) []byte {
	dir := t.TempDir()
	for name, text := range map[string]string{"go.mod": "module example.com/other\n\ngo 1.24\n", "main.go": "package main\n\nfunc main() {}\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	build := exec.Command("go", "build", "-o", "other", ".")
	build.Dir = dir
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building a static program: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(dir, "other"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// dynamic is a dynamically linked executable of this host, or nil.
func dynamic(t *testing.T) []byte {
	for _, p := range []string{"/bin/ls", "/usr/bin/env"} {
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b[:min(len(b), 4096)], []byte("ld-linux")) {
			return b
		}
	}
	t.Log("no dynamically linked executable found to refuse")
	return nil
}

func digestOf(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// exposed are the ports deploy/Dockerfile exposes.
func exposed(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "EXPOSE" {
			return f[1:]
		}
	}
	t.Fatal("deploy/Dockerfile has no EXPOSE")
	return nil
}

// TestDockerfileExposesProbes (issue 38 item 5): the Dockerfile's image
// exposes the ports the pods use: QUIC, /metrics and /healthz (the
// probes' port; it exposed 9464 only).
func TestDockerfileExposesProbes(t *testing.T) {
	got := strings.Join(exposed(t), " ")
	for _, p := range []string{strconv.Itoa(deploy.QUICPort) + "/udp", strconv.Itoa(deploy.MetricsPort) + "/tcp", strconv.Itoa(deploy.HealthPort) + "/tcp"} {
		if !strings.Contains(" "+got+" ", " "+p+" ") {
			t.Errorf("deploy/Dockerfile exposes %s; want %s among them", got, p)
		}
	}
}
