package rules

import (
	"fmt"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// nodeRules judge the node's own resources: disk space and inodes, swap,
// certificate validity and the CNI configuration.
var nodeRules = []Rule{
	{Name: "disk-usage", Fn: diskRule},
	{Name: "swap", Fn: swapRule},
	{Name: "certificate-validity", Fn: certificateRule},
	{Name: "cni-config", Fn: cniRule},
}

// ---- disk ----------------------------------------------------------------

// The directories whose filesystems the kubelet watches: the filesystem of
// its root directory is "nodefs", the one of the runtime's root "imagefs".
const (
	diskKubeletRoot    = "/var/lib/kubelet"
	diskContainerdRoot = "/var/lib/containerd"
)

// Thresholds of our own, for any listed filesystem (df's Use%).
const (
	diskFullPercent        = 95.0
	diskNearlyFullPercent  = 85.0
	diskInodesFullPercent  = 95.0
	diskSignalNodefsAvail  = "nodefs.available"
	diskSignalNodefsInode  = "nodefs.inodesFree"
	diskSignalImagefsAvail = "imagefs.available"
	diskSignalImagefsInode = "imagefs.inodesFree"
)

// diskDefaultEvictionHard are the kubelet's default hard eviction thresholds
// for disk (kubernetes/kubernetes pkg/kubelet/eviction/defaults_linux.go,
// DefaultEvictionHard: nodefs.available<10%, nodefs.inodesFree<5%,
// imagefs.available<15%; newer kubelets also default imagefs.inodesFree<5%).
// A signal is met when what is available is strictly below the threshold
// (pkg/kubelet/eviction/helpers.go thresholdsMet), so exactly 10% available
// is not yet pressure.
//
// An evictionHard map in the KubeletConfiguration replaces these defaults
// as a whole: signals it does not name are then off (unless
// mergeDefaultEvictionSettings, which the evidence does not carry).
var diskDefaultEvictionHard = map[string]string{
	diskSignalNodefsAvail:  "10%",
	diskSignalNodefsInode:  "5%",
	diskSignalImagefsAvail: "15%",
	diskSignalImagefsInode: "5%",
}

// diskThreshold is an eviction threshold: a percentage of the capacity or an
// absolute quantity.
type diskThreshold struct {
	signal  string
	raw     string // as written: "10%", "2Gi"
	percent float64
	amount  uint64
	isPct   bool
}

// met says whether available out of capacity is below the threshold.
func (t diskThreshold) met(available, capacity uint64) bool {
	if capacity == 0 {
		return false
	}
	if t.isPct {
		return float64(available) < float64(capacity)*t.percent/100
	}
	return available < t.amount
}

func (t diskThreshold) String() string { return t.signal + "<" + t.raw }

// diskThresholds returns the kubelet's hard eviction thresholds for disk
// signals: those of its configuration when it sets evictionHard, else the
// defaults. Values that do not parse are ignored (the kubelet refuses them).
func diskThresholds(in *Input) map[string]diskThreshold {
	src := diskDefaultEvictionHard
	if m := in.KubeletConfig().GetConfig().GetEvictionHard(); len(m) > 0 {
		src = m
	}
	out := map[string]diskThreshold{}
	for _, sig := range []string{diskSignalNodefsAvail, diskSignalNodefsInode, diskSignalImagefsAvail, diskSignalImagefsInode} {
		raw, ok := src[sig]
		if !ok {
			continue
		}
		if t, ok := parseDiskThreshold(sig, raw); ok {
			out[sig] = t
		}
	}
	return out
}

// parseDiskThreshold parses "10%" or a quantity ("500Mi", "2G", "1e9").
func parseDiskThreshold(signal, raw string) (diskThreshold, bool) {
	s := strings.TrimSpace(raw)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(p, 64)
		if err != nil || v < 0 || v > 100 {
			return diskThreshold{}, false
		}
		return diskThreshold{signal: signal, raw: raw, percent: v, isPct: true}, true
	}
	mult := 1.0
	for _, u := range []struct {
		suffix string
		mult   float64
	}{
		{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"Pi", 1 << 50}, {"Ei", 1 << 60},
		{"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}, {"P", 1e15}, {"E", 1e18},
	} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = n, u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsInf(v*mult, 0) || v*mult > math.MaxUint64/2 {
		return diskThreshold{}, false
	}
	return diskThreshold{signal: signal, raw: raw, amount: uint64(v * mult)}, true
}

// diskRule raises, per filesystem:
//   - DiskFull when the kubelet's nodefs (the filesystem of /var/lib/kubelet)
//     or imagefs (the one of /var/lib/containerd) is below its hard eviction
//     threshold for available space, or any listed filesystem is at least
//     95% used;
//   - DiskInodesExhausted when its inodes are at least 95% used, or below the
//     kubelet's inodesFree threshold for nodefs or imagefs;
//   - DiskNearlyFull (a warning) at 85% used when it is not full.
//
// Read-only filesystems are skipped.
func diskRule(in *Input) []*nodediagv1.Finding {
	thresholds := diskThresholds(in)
	var out []*nodediagv1.Finding
	for _, f := range in.Filesystems() {
		if f.GetTotalBytes() == 0 || f.GetReadOnly() {
			// A read-only filesystem (an immutable image's squashfs or
			// erofs /) is always full, by design.
			continue
		}
		paths := append([]string{f.GetPath()}, f.GetAlso()...)
		holds := func(p string) bool {
			for _, q := range paths {
				if q == p {
					return true
				}
			}
			return false
		}
		mount := f.GetMountPoint()
		if mount == "" {
			mount = f.GetPath()
		}
		used := diskRound(f.GetUsedPercent())

		// Space.
		fullPath, why := "", ""
		for _, c := range []struct{ dir, signal string }{
			{diskKubeletRoot, diskSignalNodefsAvail},
			{diskContainerdRoot, diskSignalImagefsAvail},
		} {
			t, ok := thresholds[c.signal]
			if ok && holds(c.dir) && t.met(f.GetFreeBytes(), f.GetTotalBytes()) {
				fullPath, why = c.dir, fmt.Sprintf("below the kubelet's hard eviction threshold %s", t)
				break
			}
		}
		if fullPath == "" && used >= diskFullPercent {
			fullPath, why = f.GetPath(), fmt.Sprintf("at least %.0f%% used", diskFullPercent)
		}
		switch {
		case fullPath != "":
			out = append(out, DiskFull.Finding(Params{
				"path":         fullPath,
				"used_percent": fmt.Sprintf("%.1f", used),
				"free":         diskHumanBytes(f.GetFreeBytes()),
				"mount":        mount,
			}, diskQuote(f, fullPath, why)))
		case used >= diskNearlyFullPercent:
			out = append(out, DiskNearlyFull.Finding(Params{
				"path":         f.GetPath(),
				"used_percent": fmt.Sprintf("%.1f", used),
				"free":         diskHumanBytes(f.GetFreeBytes()),
				"mount":        mount,
			}, diskQuote(f, f.GetPath(), "")))
		}

		// Inodes.
		if f.GetInodesTotal() == 0 {
			continue
		}
		inodePath, why := "", ""
		for _, c := range []struct{ dir, signal string }{
			{diskKubeletRoot, diskSignalNodefsInode},
			{diskContainerdRoot, diskSignalImagefsInode},
		} {
			t, ok := thresholds[c.signal]
			if ok && holds(c.dir) && t.met(f.GetInodesFree(), f.GetInodesTotal()) {
				inodePath, why = c.dir, fmt.Sprintf("below the kubelet's hard eviction threshold %s", t)
				break
			}
		}
		iused := diskRound(f.GetInodesUsedPercent())
		if inodePath == "" && iused >= diskInodesFullPercent {
			inodePath, why = f.GetPath(), fmt.Sprintf("at least %.0f%% of inodes used", diskInodesFullPercent)
		}
		if inodePath != "" {
			out = append(out, DiskInodesExhausted.Finding(Params{
				"path":                inodePath,
				"inodes_used_percent": fmt.Sprintf("%.1f", iused),
				"mount":               mount,
			}, diskQuote(f, inodePath, why)))
		}
	}
	return out
}

// diskRound rounds a percentage to the one decimal it is shown with, so that
// a title never says "95.0% used" for a filesystem judged below 95%.
func diskRound(p float64) float64 { return math.Round(p*10) / 10 }

// diskQuote states what statfs measured for the filesystem holding p, as df
// would show it, and why it is judged so.
func diskQuote(f *nodediagv1.Filesystem, p, why string) *nodediagv1.Quote {
	mount := f.GetMountPoint()
	if mount == "" {
		mount = "?"
	}
	fstype := f.GetFstype()
	if fstype == "" {
		fstype = "?"
	}
	text := fmt.Sprintf("%s %s size=%s used=%s avail=%s use%%=%.1f inodes used%%=%.1f",
		mount, fstype, diskHumanBytes(f.GetTotalBytes()), diskHumanBytes(f.GetUsedBytes()), diskHumanBytes(f.GetFreeBytes()),
		f.GetUsedPercent(), f.GetInodesUsedPercent())
	if why != "" {
		text += " (" + why + ")"
	}
	return QuoteText("statfs:"+p, text)
}

// diskHumanBytes prints a size the way an operator reads it: "312 MiB",
// "2.0 GiB" (one decimal below 10 units).
func diskHumanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	for v >= unit && i < len(units)-1 {
		v /= unit
		i++
	}
	if v < 10 {
		return fmt.Sprintf("%.1f %s", v, units[i])
	}
	return fmt.Sprintf("%.0f %s", v, units[i])
}

// ---- swap ----------------------------------------------------------------

// swapRule raises SwapEnabled when /proc/swaps lists a swap area and the
// kubelet does not allow swap: failSwapOn defaults to true, and the kubelet
// then exits ("running with swap on is not supported, please disable swap
// or set --fail-swap-on flag to false"). A --fail-swap-on flag on the
// command line wins over the configuration file.
func swapRule(in *Input) []*nodediagv1.Finding {
	sw := in.Swap()
	if len(sw.GetDevices()) == 0 {
		return nil
	}
	failSwapOn, setBy := swapFailSwapOn(in.KubeletConfig())
	if !failSwapOn {
		return nil
	}
	var devices []string
	var quotes []*nodediagv1.Quote
	for _, d := range sw.GetDevices() {
		devices = append(devices, d.GetFilename()+" "+diskHumanBytes(d.GetSizeKib()*1024))
		q := QuoteLine(d.GetLine())
		if q == nil {
			q = QuoteText("/proc/swaps", d.GetFilename())
		}
		quotes = append(quotes, q)
	}
	quotes = append(quotes, QuoteLine(setBy))
	f := SwapEnabled.Finding(Params{"devices": strings.Join(devices, ", ")}, quotes...)
	if in.KubeletConfig() == nil {
		// The kubelet's own setting was not seen: the default applies, but
		// it may not be what this node runs with.
		f.Confidence = Medium
	}
	return []*nodediagv1.Finding{f}
}

// swapFailSwapOn returns the kubelet's effective failSwapOn and the line
// that set it, if any.
// Like pflag, the last flag on the command line wins, and "_" and "-" are
// the same in a flag name.
func swapFailSwapOn(kc *nodediagv1.KubeletConfig) (bool, *nodediagv1.SourceLine) {
	flags := kc.GetFlags()
	for i := len(flags) - 1; i >= 0; i-- {
		fl := flags[i]
		if !fl.GetActive() || strings.ReplaceAll(fl.GetName(), "_", "-") != "fail-swap-on" {
			continue
		}
		if fl.GetValue() == "" {
			return true, fl.GetSource()
		}
		if v, err := strconv.ParseBool(fl.GetValue()); err == nil {
			return v, fl.GetSource()
		}
	}
	cfg := kc.GetConfig()
	if cfg != nil && cfg.FailSwapOn != nil {
		return *cfg.FailSwapOn, cfg.GetFailSwapOnLine()
	}
	return true, nil
}

// ---- certificates --------------------------------------------------------

// certSoon is how close to its expiry a certificate raises a warning.
const certSoon = 14 * 24 * time.Hour

// The kubelet's rotated certificates (its certificate manager, for the
// client certificate and, with serverTLSBootstrap, the serving one): the
// current one is the symlink <prefix>current.pem; the <prefix><timestamp>.pem
// files beside it are earlier rotations that nothing uses any more.
const certKubeletPKIDir = "/var/lib/kubelet/pki"

var certKubeletRotated = []string{"kubelet-client-", "kubelet-server-"}

// clockSlack is how far a lower-bound evidence clock may be behind the real
// time of a copied host before "not yet valid" means a clock problem.
const clockSlack = 24 * time.Hour

// certificateRule judges every certificate against the evidence clock:
// CertificateExpired after notAfter, CertificateNotYetValid before notBefore
// (the node's clock is behind), CertificateExpiresSoon within 14 days of
// notAfter. Rotated kubelet certificates that the current symlink no longer
// points to are ignored.
//
// On a copy of a host without --now, the evidence clock is the newest time
// the evidence shows: a lower bound of the real one. Expiry judged against
// it holds; "not yet valid" holds only beyond clockSlack.
func certificateRule(in *Input) []*nodediagv1.Finding {
	now := in.Clock
	var out []*nodediagv1.Finding
	for _, c := range in.Certificates() {
		if certIsStaleKubeletRotation(c.GetPath()) || c.GetNotAfter() == nil || c.GetNotBefore() == nil {
			continue
		}
		name := c.GetPath()
		if c.GetEmbeddedIn() != "" {
			name += " (client-certificate-data)"
		}
		if c.GetIndex() > 0 {
			name += fmt.Sprintf(" (certificate #%d of the file)", c.GetIndex()+1)
		}
		notBefore, notAfter := c.GetNotBefore().AsTime(), c.GetNotAfter().AsTime()
		q := certQuote(c)
		switch {
		case notAfter.Before(now) && isKubeletSelfSignedServing(c):
			out = append(out, KubeletServingCertificateExpired.Finding(Params{
				"path": name, "not_after": notAfter.UTC().Format(time.RFC3339),
			}, q))
		case notAfter.Before(now):
			out = append(out, CertificateExpired.Finding(Params{
				"path": name, "not_after": notAfter.UTC().Format(time.RFC3339),
			}, q))
		case notBefore.After(now):
			if in.ClockIsLowerBound && notBefore.Sub(now) < clockSlack {
				// A copy of a host was taken some time after its newest
				// log line: a certificate issued in between says nothing
				// of the node's clock.
				continue
			}
			out = append(out, CertificateNotYetValid.Finding(Params{
				"path": name, "not_before": notBefore.UTC().Format(time.RFC3339),
			}, q))
		case !notAfter.After(now.Add(certSoon)):
			out = append(out, CertificateExpiresSoon.Finding(Params{
				"path": name, "not_after": notAfter.UTC().Format(time.RFC3339), "left": humanDuration(notAfter.Sub(now)),
			}, q))
		}
	}
	return out
}

// isKubeletSelfSignedServing says whether c is the serving certificate the
// kubelet generates for itself when serverTLSBootstrap is off
// (/var/lib/kubelet/pki/kubelet.crt, issuer = subject = "<host>@<epoch>"):
// it is made once, valid a year, and never renewed.
func isKubeletSelfSignedServing(c *nodediagv1.Certificate) bool {
	return c.GetPath() == certKubeletPKIDir+"/kubelet.crt" && c.GetIssuer() == c.GetSubject()
}

// certIsStaleKubeletRotation says whether p is a rotated kubelet
// certificate other than the current one.
func certIsStaleKubeletRotation(p string) bool {
	dir, base := path.Split(p)
	if path.Clean(dir) != certKubeletPKIDir || !strings.HasSuffix(base, ".pem") {
		return false
	}
	for _, prefix := range certKubeletRotated {
		if strings.HasPrefix(base, prefix) && base != prefix+"current.pem" {
			return true
		}
	}
	return false
}

func certQuote(c *nodediagv1.Certificate) *nodediagv1.Quote {
	text := fmt.Sprintf("subject=%s notBefore=%s notAfter=%s", c.GetSubject(),
		c.GetNotBefore().AsTime().UTC().Format(time.RFC3339), c.GetNotAfter().AsTime().UTC().Format(time.RFC3339))
	if c.GetIndex() > 0 {
		text = fmt.Sprintf("certificate #%d: %s", c.GetIndex()+1, text)
	}
	if c.GetEmbeddedIn() != "" {
		text = "client-certificate-data: " + text
	}
	return QuoteText(c.GetPath(), text)
}

// ---- cni -----------------------------------------------------------------

// cniRule judges the CNI configuration the way containerd loads it (go-cni
// loadFromConfDir): the files of the conf dir in lexical order, the first
// valid one being the pod network (max_conf_num defaults to 1). A file that
// fails to parse before it stops the load ("failed to load CNI config list
// file"), so CNIConfigInvalid is raised for invalid files sorting before the
// first valid one, or for all when none is valid; later invalid files are
// never read. CNIPluginMissing is raised for each plugin type of the first
// valid config whose binary is not in the bin dir, when the bin dir was
// listed.
func cniRule(in *Input) []*nodediagv1.Finding {
	c := in.CNI()
	if c == nil {
		return nil
	}
	dir := c.GetConfDir()
	if len(c.GetConfigs()) == 0 && !nodeJoined(in) {
		// The CNI add-on reaches a node only after it joined: before that a
		// missing configuration is expected, not a cause.
		return nil
	}
	if !c.GetConfDirPresent() {
		return []*nodediagv1.Finding{CNIConfigMissing.Finding(Params{"dir": dir}, QuoteText(dir, "directory does not exist"))}
	}
	if len(c.GetConfigs()) == 0 {
		return []*nodediagv1.Finding{CNIConfigMissing.Finding(Params{"dir": dir}, QuoteText(dir, "no *.conf, *.conflist or *.json file"))}
	}
	configs := append([]*nodediagv1.CNIConfig(nil), c.GetConfigs()...)
	sort.SliceStable(configs, func(i, j int) bool { return path.Base(configs[i].GetPath()) < path.Base(configs[j].GetPath()) })

	var out []*nodediagv1.Finding
	var first *nodediagv1.CNIConfig
	for _, cfg := range configs {
		if cfg.GetParseError() == "" {
			first = cfg
			break
		}
		out = append(out, CNIConfigInvalid.Finding(Params{"file": cfg.GetPath(), "error": cfg.GetParseError()},
			QuoteText(cfg.GetPath(), cfg.GetParseError())))
	}
	if first == nil || !c.GetBinDirPresent() {
		return out
	}
	have := map[string]bool{}
	for _, p := range c.GetPlugins() {
		have[p] = true
	}
	seen := map[string]bool{}
	for _, typ := range first.GetTypes() {
		if typ == "" || have[typ] || seen[typ] {
			continue
		}
		seen[typ] = true
		listing := "no plugin binaries"
		if len(c.GetPlugins()) > 0 {
			listing = "plugins: " + strings.Join(c.GetPlugins(), ", ")
		}
		out = append(out, CNIPluginMissing.Finding(Params{"file": first.GetPath(), "plugin": typ, "bin_dir": c.GetBinDir()},
			QuoteText(first.GetPath(), "plugin types: "+strings.Join(first.GetTypes(), ", ")),
			QuoteText(c.GetBinDir(), listing)))
	}
	return out
}

// nodeJoined says whether the node got far enough for a CNI add-on to reach
// it: the bootstrap sentinel is present, or the kubelet has its kubeconfig.
func nodeJoined(in *Input) bool {
	return in.CloudInit().GetSentinelPresent() || in.Kubeadm().GetKubeletConf().GetPresent()
}
