// Package ctdconfig reads containerd's configuration as its files say it:
// the main config.toml in its three layouts, its imports, and the registry
// hosts files (<config_path>/<registry>/hosts.toml).
//
//   - Read(h) reads all of it from a host and returns the Containerd
//     evidence; Endpoints(cfg) lists its registry endpoints (legacy mirrors,
//     then each hosts file's).
//   - ParseConfig, Build and ParseHosts are the pure functions underneath:
//     bytes in, evidence out.
//
// Layouts: version 1 (no version key; plugins keyed by ID, plugins.cri),
// version 2 (containerd 1.x; plugins."io.containerd.grpc.v1.cri") and
// version 3 (containerd 2.x; plugins."io.containerd.cri.v1.images" holds the
// registry and pinned_images.sandbox, plugins."io.containerd.cri.v1.runtime"
// the runtimes and CNI), per containerd's docs/cri/config.md.
//
// Every value reported carries the line that writes it (file, number and
// text) for quoting. Credentials never enter the evidence: registry auth and
// hosts.toml headers are not read, client key pairs are only checked, and a
// quoted line or URL has its secrets redacted (agent/redact).
//
// Verified against the real containerd (Debian's 1.6.20, oracle_test.go):
// `containerd config dump` for the merge of imports, and `ctr images pull
// --hosts-dir` for which hosts files containerd rejects.
package ctdconfig

// Host paths and containerd's built-in defaults.
const (
	// ConfigFile is containerd's main configuration, written by the image
	// build or the bootstrap (often `containerd config default`, then
	// edited by preKubeadmCommands).
	ConfigFile = "/etc/containerd/config.toml"
	// DefaultGRPCAddress is the socket containerd serves without [grpc] address.
	DefaultGRPCAddress = "/run/containerd/containerd.sock"
	// DefaultCNIConfDir and DefaultCNIBinDir are the CRI plugin's CNI defaults.
	DefaultCNIConfDir = "/etc/cni/net.d"
	DefaultCNIBinDir  = "/opt/cni/bin"
)
