package home

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idface/idface/config"
)

// TestSealKey: a server's home has a seal key (0600) matching its
// descriptor; a damaged, exposed or missing one is refused with what to
// do; rotation keeps it, and gives one to a home made before it existed.
func TestSealKey(t *testing.T) {
	dir := t.TempDir()
	h, err := Init(dir, "h1", config.RoleShareHolder, "127.0.0.1:7000", "", false)
	if err != nil {
		t.Fatal(err)
	}
	k, err := h.SealKey()
	if err != nil || h.Self.Seal == "" || k.Public().String() != h.Self.Seal {
		t.Fatalf("seal key: %v", err)
	}
	pub, err := ReadDescriptor(h.PubPath())
	if err != nil || pub.Seal != h.Self.Seal {
		t.Fatalf("descriptor: %v", err)
	}
	path := filepath.Join(dir, sealFile)
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode().Perm())
	}
	h2, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := h2.Rotate(); err != nil {
		t.Fatal(err)
	}
	if h2.Self.Seal != h.Self.Seal {
		t.Fatal("rotation replaced the seal key")
	}

	good, _ := os.ReadFile(path)
	bad := []byte(strings.Replace(string(good), "\n", "\nX", 1))
	os.WriteFile(path, bad, 0o600)
	if _, err := h.SealKey(); err == nil || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("damaged key: %v", err)
	}
	os.WriteFile(path, good, 0o600)
	os.Chmod(path, 0o644)
	if _, err := h.SealKey(); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("exposed key: %v", err)
	}
	os.Remove(path)
	if _, err := h.SealKey(); err == nil || !strings.Contains(err.Error(), "party rotate") {
		t.Fatalf("missing key: %v", err)
	}
	// A home from before sealed enrollment gets a key at rotation.
	h.Self.Seal = ""
	if err := h.Rotate(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.SealKey(); err != nil || h.Self.Seal == "" {
		t.Fatalf("after rotation: %v", err)
	}

	c, err := Init(t.TempDir(), "ops", config.RoleOperator, "", "", false)
	if err != nil || c.Self.Seal != "" {
		t.Fatalf("a client got a seal key (%v)", err)
	}
}

// TestRotationStages: --stage keeps the current key in use and names the
// next in the descriptor; a reader that finds the new key beside the old
// certificate (in the middle of --finish) still gets a pair the
// descriptor names; --finish makes the next key the member's; a second
// stage or finish in the wrong order is refused.
func TestRotationStages(t *testing.T) {
	dir := t.TempDir()
	h, err := Init(dir, "gate", config.RoleDevice, "", "", false)
	if err != nil {
		t.Fatal(err)
	}
	old := h.Self.Pin
	if err := h.Finish(); err == nil {
		t.Fatal("finish without a stage")
	}
	if err := h.Stage(); err != nil || h.Self.Next == nil || h.Self.Pin != old {
		t.Fatalf("stage: %v %+v", err, h.Self.Next)
	}
	if err := h.Stage(); err == nil {
		t.Fatal("a second stage")
	}
	next := h.Self.Next.Pin
	if pub, err := ReadDescriptor(h.PubPath()); err != nil || pub.Next == nil || pub.Next.Pin != next || pub.Pin != old {
		t.Fatalf("the staged descriptor: %v %+v", err, pub)
	}
	if _, err := h.Certificate(); err != nil {
		t.Fatalf("the current key while staged: %v", err)
	}
	// Half of a finish: the new key beside the old certificate.
	b, _ := os.ReadFile(filepath.Join(dir, nextKeyFile))
	good, _ := os.ReadFile(filepath.Join(dir, keyFile))
	os.WriteFile(filepath.Join(dir, keyFile+".previous"), good, 0o600)
	os.WriteFile(filepath.Join(dir, keyFile), b, 0o600)
	if _, err := h.Certificate(); err != nil {
		t.Fatalf("mid-finish: %v", err)
	}
	os.WriteFile(filepath.Join(dir, keyFile), good, 0o600)
	if err := h.Finish(); err != nil || h.Self.Pin != next || h.Self.Next != nil {
		t.Fatalf("finish: %v %+v", err, h.Self)
	}
	if _, err := h.Certificate(); err != nil {
		t.Fatalf("the new key: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, nextKeyFile)); err == nil {
		t.Fatal("the staged key is still there")
	}
}

// TestInstall copies a home laid out as Kubernetes mounts a Secret (each
// file a symlink into a "..data" directory, group-readable) into a private
// directory, and refuses a Secret whose key is not its descriptor's.
func TestInstall(t *testing.T) {
	src, err := Init(t.TempDir(), "h1", config.RoleShareHolder, "0.0.0.0:7443", "h1-0.h1.idface.svc.cluster.local:7443", false)
	if err != nil {
		t.Fatal(err)
	}
	secret := func(from string, swap map[string]string) string {
		dir := t.TempDir()
		data := filepath.Join(dir, "..2026_11_25_08_00_00.1")
		if err := os.Mkdir(data, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"home.json", "identity.key", "identity.crt", "seal.key", "h1.pub.json"} {
			b, err := os.ReadFile(filepath.Join(from, name))
			if err != nil {
				t.Fatal(err)
			}
			if other, ok := swap[name]; ok {
				if b, err = os.ReadFile(other); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(data, name), b, 0o440); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	dst := filepath.Join(t.TempDir(), "home")
	h, err := Install(secret(src.Dir, nil), dst)
	if err != nil {
		t.Fatal(err)
	}
	if h.Self.Pin != src.Self.Pin || h.Listen != "0.0.0.0:7443" {
		t.Fatalf("installed %s at %s, want %s", h.Self.Pin, h.Listen, src.Self.Pin)
	}
	entries, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 5 {
		t.Fatalf("installed %d files, want the 5 of the home", len(entries))
	}
	for _, e := range entries {
		fi, err := os.Lstat(filepath.Join(dst, e.Name()))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want a regular file of mode 0600", e.Name(), fi.Mode(), err)
		}
	}
	if _, err := h.Certificate(); err != nil {
		t.Fatal(err)
	}
	if _, err := h.SealKey(); err != nil {
		t.Fatal(err)
	}

	// Another member's key, or seal key, beside this descriptor is refused.
	other, err := Init(t.TempDir(), "h2", config.RoleShareHolder, "0.0.0.0:7443", "", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"identity.key", "seal.key"} {
		if _, err := Install(secret(src.Dir, map[string]string{f: filepath.Join(other.Dir, f)}), filepath.Join(t.TempDir(), "home")); err == nil {
			t.Errorf("a Secret with another member's %s was installed", f)
		}
	}

	// With --data elsewhere, the lock is in the data, not in the home.
	h.Data = filepath.Join(t.TempDir(), "data")
	unlock, err := h.Lock("test")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := os.Stat(filepath.Join(h.Data, "lock")); err != nil {
		t.Fatalf("no lock in the data: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dst, "lock")); err == nil {
		t.Fatal("the lock was written into the installed home")
	}
}

// TestLockOneData: however the data directory is named (the home's
// default, --data with a trailing slash, through a symbolic link), a
// second process is refused while one holds it.
func TestLockOneData(t *testing.T) {
	h, err := Init(t.TempDir(), "h1", config.RoleShareHolder, "127.0.0.1:7000", "", false)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.MkdirAll(h.DataDir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(h.DataDir(), link); err != nil {
		t.Fatal(err)
	}
	for _, first := range []string{"", h.DataDir() + "/", link} {
		a := *h
		a.Data = first
		unlock, err := a.Lock("serve")
		if err != nil {
			t.Fatal(err)
		}
		for _, second := range []string{"", h.DataDir(), h.DataDir() + "/", link, link + "/."} {
			b := *h
			b.Data = second
			if u, err := b.Lock("fsck"); err == nil {
				u()
				t.Errorf("data locked as %q, and again as %q", first, second)
			} else if !strings.Contains(err.Error(), "in use by another idface process") {
				t.Errorf("as %q then %q: %v", first, second, err)
			}
		}
		unlock()
	}

	// Moved aside while held: a new process on a fresh directory of the
	// same name is refused (the lock beside it).
	unlock, err := h.Lock("serve")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if err := os.Rename(h.DataDir(), h.DataDir()+".bad"); err != nil {
		t.Fatal(err)
	}
	b := *h
	b.Data = h.DataDir()
	if u, err := b.Lock("rebuild"); err == nil {
		u()
		t.Error("a rebuild ran on a fresh data directory while the server of the one moved aside still held it")
	}
}

// TestShardKeyFile: a shard key reads back as written; a file of another
// length (66 hex digits overran the key before the length was checked),
// not hex, or readable by others is refused with its path; none is nil.
func TestShardKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "shard.key")
	if k, err := ReadShardKey(path); k != nil || err != nil {
		t.Fatalf("no file: %v, %v", k, err)
	}
	key := [32]byte{1, 2, 3, 255}
	if err := WriteShardKey(path, &key); err != nil {
		t.Fatal(err)
	}
	if k, err := ReadShardKey(path); err != nil || *k != key {
		t.Fatalf("read back %x, %v", k, err)
	}
	for name, content := range map[string]string{
		"66 digits": strings.Repeat("ab", 33), "62 digits": strings.Repeat("ab", 31),
		"not hex": strings.Repeat("zz", 32), "long": strings.Repeat("ab", 200),
	} {
		if err := os.WriteFile(path, []byte(content+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if k, err := ReadShardKey(path); err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("%s: %x, %v", name, k, err)
		}
	}
	if err := WriteShardKey(path, &key); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o644)
	if _, err := ReadShardKey(path); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Fatalf("a key readable by others: %v", err)
	}
}
