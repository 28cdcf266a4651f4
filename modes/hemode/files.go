package hemode

import (
	"path/filepath"

	"github.com/idface/idface/config"
	"github.com/idface/idface/heidface"
)

// KeyBinding is what the HE key files of cluster p are bound to: the
// cluster and its key server (the key server's pair and every local
// server's copy of the public key alike).
func KeyBinding(p *config.Params) heidface.KeyBinding {
	k, _ := p.KeyServer()
	return heidface.KeyBinding{Cluster: p.ClusterID(), KeyServer: k.Name}
}

// PublicKeyFile is an HE local server's public key file in its data
// directory dir. Its Fingerprint, readable before the row log is opened,
// is what the server's row log and group files are bound to (on a first
// start the file exists only once NewLocal has fetched the key:
// Local.KeyFingerprint gives it then).
func PublicKeyFile(p *config.Params, dir string) heidface.KeyFile {
	return heidface.KeyFile{Path: filepath.Join(dir, "public.key"), Bind: KeyBinding(p)}
}
