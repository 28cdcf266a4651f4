package deploy

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/idface/idface/internal/codec/store"
)

// OCI media types (github.com/opencontainers/image-spec).
const (
	MediaIndex    = "application/vnd.oci.image.index.v1+json"
	MediaManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaConfig   = "application/vnd.oci.image.config.v1+json"
	MediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// ImageOptions of Image.
type ImageOptions struct {
	// Ref names the image in the layout's index ("idface:0.3.0").
	Ref string
	// Created stamps the image (default the Unix epoch, so that one
	// binary always gives the same image, byte for byte).
	Created time.Time
}

// idfaceMain is the main package an image's binary must be built from.
const idfaceMain = "github.com/idface/idface/cmd/idface"

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// Image writes an OCI image layout into dir (created; it must not hold
// one already): the image of one layer holding only bin at /idface, FROM
// scratch, run as UID 65532 with /idface as its entry point. bin must be a
// static Linux executable (CGO_ENABLED=0): the image has no C library.
// Nothing is fetched; the result loads with 'skopeo copy oci:DIR ...',
// 'podman load', 'ctr image import' (as a tar: ImageTar) or a registry
// push of the layout.
func Image(dir string, bin []byte, o ImageOptions) (manifest string, err error) {
	files, manifest, err := imageFiles(bin, o)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "index.json")); err == nil {
		return "", fmt.Errorf("%s holds an image layout already: give a new directory", dir)
	}
	for _, f := range files {
		path := filepath.Join(dir, filepath.FromSlash(f.name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", err
		}
		if err := store.WriteFile(path, f.data, 0o644); err != nil {
			return "", err
		}
	}
	return manifest, nil
}

// ImageTar is Image as one tar archive (an OCI archive), for 'podman
// load', 'ctr image import' or 'skopeo copy oci-archive:FILE ...'.
func ImageTar(bin []byte, o ImageOptions) (archive []byte, manifest string, err error) {
	files, manifest, err := imageFiles(bin, o)
	if err != nil {
		return nil, "", err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []string{"blobs", "blobs/sha256"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: o.created(), Format: tar.FormatPAX}); err != nil {
			return nil, "", err
		}
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)), ModTime: o.created(), Format: tar.FormatPAX}); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), manifest, nil
}

func (o ImageOptions) created() time.Time {
	if o.Created.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return o.Created.UTC()
}

type file struct {
	name string // slash-separated, relative to the layout
	data []byte
}

// imageFiles are the layout's files: oci-layout, index.json and the
// blobs (the layer, the config, the manifest).
func imageFiles(bin []byte, o ImageOptions) ([]file, string, error) {
	arch, version, err := staticIdface(bin)
	if err != nil {
		return nil, "", err
	}
	if o.Ref == "" {
		return nil, "", fmt.Errorf("name the image (--ref idface:VERSION)")
	}
	created := o.created()
	layerTar, err := layer(bin, created)
	if err != nil {
		return nil, "", err
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression) // no name, no time: reproducible
	zw.Write(layerTar)
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	layerBlob := gz.Bytes()

	labels := map[string]string{"org.opencontainers.image.title": "idface", "org.opencontainers.image.description": "protected 1:N face identification (idface serve)"}
	if version != "" {
		labels["org.opencontainers.image.version"] = version
	}
	cfg, err := json.Marshal(map[string]any{
		"created":      created.Format(time.RFC3339),
		"architecture": arch,
		"os":           "linux",
		"config": map[string]any{
			"User":         strconv.Itoa(UID) + ":" + strconv.Itoa(UID),
			"Entrypoint":   []string{binary},
			"Cmd":          []string{"version"},
			"ExposedPorts": map[string]any{strconv.Itoa(QUICPort) + "/udp": struct{}{}, strconv.Itoa(MetricsPort) + "/tcp": struct{}{}, strconv.Itoa(HealthPort) + "/tcp": struct{}{}},
			"Labels":       labels,
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{digest(layerTar)}},
		"history": []map[string]any{{"created": created.Format(time.RFC3339), "created_by": "idface deploy image", "comment": "FROM scratch; /idface, a static executable"}},
	})
	if err != nil {
		return nil, "", err
	}
	man, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     MediaManifest,
		"config":        descriptor{MediaType: MediaConfig, Digest: digest(cfg), Size: int64(len(cfg))},
		"layers":        []descriptor{{MediaType: MediaLayer, Digest: digest(layerBlob), Size: int64(len(layerBlob))}},
		"annotations":   map[string]string{"org.opencontainers.image.created": created.Format(time.RFC3339)},
	})
	if err != nil {
		return nil, "", err
	}
	tag := o.Ref
	if i := strings.LastIndex(o.Ref, ":"); i > strings.LastIndex(o.Ref, "/") {
		tag = o.Ref[i+1:]
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     MediaIndex,
		"manifests": []descriptor{{MediaType: MediaManifest, Digest: digest(man), Size: int64(len(man)),
			Platform:    &platform{Architecture: arch, OS: "linux"},
			Annotations: map[string]string{"org.opencontainers.image.ref.name": tag, "io.containerd.image.name": o.Ref}}},
	})
	if err != nil {
		return nil, "", err
	}
	blob := func(b []byte) file { return file{"blobs/sha256/" + strings.TrimPrefix(digest(b), "sha256:"), b} }
	return []file{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		blob(layerBlob), blob(cfg), blob(man),
		{"index.json", index},
	}, digest(man), nil
}

// layer is the image's only layer, uncompressed: /idface.
func layer(bin []byte, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(binary, "/"), Mode: 0o755, Size: int64(len(bin)), ModTime: created, Format: tar.FormatPAX}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func digest(b []byte) string {
	h := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(h[:])
}

// staticIdface checks bin is idface built for Linux with no C (FROM
// scratch has no dynamic loader nor C library), and names its
// architecture as OCI does and its module version.
func staticIdface(bin []byte) (arch, version string, err error) {
	const build = "build it with 'CGO_ENABLED=0 GOOS=linux go build -trimpath -o idface ./cmd/idface' and give --binary idface"
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return "", "", fmt.Errorf("the binary is not a Linux executable (%v): %s", err, build)
	}
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", "", fmt.Errorf("the binary is an ELF %v, not an executable: %s", f.Type, build)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", "", fmt.Errorf("the binary is linked dynamically (it needs a loader and a C library, which an image FROM scratch lacks): %s", build)
		}
	}
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		return "", "", fmt.Errorf("the binary carries no Go build information (%v): %s", err, build)
	}
	if bi.Path != idfaceMain {
		return "", "", fmt.Errorf("the binary is %s, not idface (%s): %s", bi.Path, idfaceMain, build)
	}
	for _, s := range bi.Settings {
		if s.Key == "GOOS" && s.Value != "linux" || s.Key == "CGO_ENABLED" && s.Value != "0" {
			return "", "", fmt.Errorf("the binary was built with %s=%s: %s", s.Key, s.Value, build)
		}
	}
	switch f.Machine {
	case elf.EM_X86_64:
		arch = "amd64"
	case elf.EM_AARCH64:
		arch = "arm64"
	default:
		return "", "", fmt.Errorf("the binary is for %v: images are built for amd64 and arm64", f.Machine)
	}
	return arch, bi.Main.Version, nil
}
