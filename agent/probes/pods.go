package probes

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/logline"
	"github.com/nodediag/nodediag/agent/probe"
	"github.com/nodediag/nodediag/agent/redact"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// Where the pods probe looks.
const (
	// The kubelet writes (through the runtime) every container's stdout and
	// stderr to /var/log/pods/<namespace>_<pod>_<uid>/<container>/<n>.log,
	// in the CRI log format, and starts <n>+1.log at each start of the
	// container (pkg/kubelet/kuberuntime: BuildContainerLogsDirectory). Its
	// log manager rotates a file that grows past containerLogMaxSize into
	// <n>.log.<YYYYMMDD-hhmmss> and gzips the older rotations (.gz, through
	// a .tmp). Its container garbage collector deletes the logs of dead
	// containers beyond one per container (--maximum-dead-containers-per-
	// container=1): usually only the latest one or two <n> are left.
	podsDir = "/var/log/pods"
	// kubeadm writes the control plane's static pod manifests here; the
	// kubelet runs them as pods named <manifest's name>-<node name>.
	podsManifestsDir = "/etc/kubernetes/manifests"
)

// podsNamespaces are the namespaces whose pods are read: those of the node's
// own machinery (the control plane's static pods, kube-proxy, the cloud node
// manager, CSI node plugins, CoreDNS in kube-system; the CNI agent in
// calico-system (the Tigera operator's Calico, as CAPZ installs it) or
// kube-flannel). Workloads' pods are not read: their logs are theirs, and
// what they say is no evidence about the node.
var podsNamespaces = map[string]bool{"kube-system": true, "calico-system": true, "kube-flannel": true}

// podsComponents are the control plane components kubeadm runs as static
// pods, by manifest name.
var podsComponents = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"}

// Limits of the pods probe.
const (
	// podsMaxListed bounds the containers listed (directory names only).
	podsMaxListed = 512
	// podsMaxRead is how many containers' logs are read: the control
	// plane's static pods first, then the most restarted.
	podsMaxRead = 64
	// podsHead and podsTail bound what is read of the latest log of a
	// container; podsPrevHead and podsPrevTail of the previous run's.
	podsHead     = 256 << 10
	podsTail     = 1 << 20
	podsPrevHead = 64 << 10
	podsPrevTail = 256 << 10
	// podsContext is how many of the last messages of a log are kept
	// whatever they say: how the run ended.
	podsContext = 30
	// podsKeepFirst and podsKeepLast bound the notable messages kept per
	// log: the first ones (the run's first errors) and the last ones (how
	// it ended). A control plane component can log an error a second for
	// days; the excerpt stays small.
	podsKeepFirst = 50
	podsKeepLast  = 150
)

// pods reads the container logs the kubelet keeps under /var/log/pods: the
// restarts of each container (the highest <n> of its <n>.log files), and the
// lines of its latest log that matter. They are readable with the runtime
// down and on a copy of a host, where neither crictl nor the API can answer.
//
// Only the pods of podsNamespaces are read, at most podsMaxRead containers'
// logs (static control plane pods first, then the most restarted); the
// others beyond that cap are listed without their logs and the cap is
// recorded as unreadable. Of each container, the latest log (head and tail,
// podsHead + podsTail) and the previous run's (podsPrevHead + podsPrevTail)
// are read; gzipped rotations are listed, never decompressed.
//
// It is skipped when /var/log/pods does not exist (a node that never ran a
// pod, or a copy without it).
type pods struct{}

func (pods) Name() string { return "pods" }

func (pods) Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	ents, err := h.ReadDir(podsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: no %s", probe.ErrNotApplicable, podsDir)
	}
	if err != nil {
		return nil, err
	}
	pe := &nodediagv1.ProbeEvidence{}
	node := podsNodeName(h)
	manifests := podsManifests(h, pe)

	var all []*nodediagv1.PodContainer
	files := map[*nodediagv1.PodContainer][]podsFile{}
	notListed := 0
	for _, e := range ents {
		ns, pod, uid, ok := parsePodDir(e.Name())
		if !ok || !e.IsDir() || !podsNamespaces[ns] {
			continue
		}
		dir := podsDir + "/" + e.Name()
		cents, err := h.ReadDir(dir)
		if err != nil {
			probe.Unreadable(pe, dir, err)
			continue
		}
		for _, ce := range cents {
			if !ce.IsDir() || !utf8.ValidString(ce.Name()) {
				continue // container names are DNS labels: not the kubelet's
			}
			if len(all) == podsMaxListed {
				notListed++
				continue
			}
			c := &nodediagv1.PodContainer{
				Namespace: ns, Pod: pod, PodUid: uid, Container: ce.Name(),
				Dir:    dir + "/" + ce.Name(),
				Static: podsStatic(ns, pod, uid, node, manifests),
			}
			fents, err := h.ReadDir(c.Dir)
			if err != nil {
				probe.Unreadable(pe, c.Dir, err)
			}
			found := podsFiles(fents)
			for _, f := range found {
				c.Files = append(c.Files, f.name)
				c.Restarts = max(c.Restarts, f.n)
			}
			files[c] = found
			all = append(all, c)
		}
	}
	if notListed > 0 {
		probe.Unreadable(pe, podsDir, fmt.Errorf("%d more containers not listed: at most %d are", notListed, podsMaxListed))
	}

	// Read the logs of the most telling containers first.
	byPriority := append([]*nodediagv1.PodContainer(nil), all...)
	sort.SliceStable(byPriority, func(i, j int) bool {
		a, b := byPriority[i], byPriority[j]
		if a.Static != b.Static {
			return a.Static
		}
		return a.Restarts > b.Restarts
	})
	if len(byPriority) > podsMaxRead {
		probe.Unreadable(pe, podsDir, fmt.Errorf("the logs of %d containers were not read: at most %d containers' are (static control plane pods first, then the most restarted)", len(byPriority)-podsMaxRead, podsMaxRead))
		byPriority = byPriority[:podsMaxRead]
	}
	for i, c := range byPriority {
		if err := ctx.Err(); err != nil {
			probe.Unreadable(pe, podsDir, fmt.Errorf("the logs of %d containers were not read: %w", len(byPriority)-i, err))
			break
		}
		latest, prev := podsLatest(files[c])
		if latest != nil {
			c.Log = podsReadLog(h, pe, c.Dir+"/"+latest.name, c.Container, podsHead, podsTail)
		}
		if prev != nil {
			c.PreviousLog = podsReadLog(h, pe, c.Dir+"/"+prev.name, c.Container, podsPrevHead, podsPrevTail)
		}
		for _, ex := range []*nodediagv1.LogExcerpt{c.Log, c.PreviousLog} {
			if t := ex.GetLastTime(); t != nil && (c.LastTime == nil || t.AsTime().After(c.LastTime.AsTime())) {
				c.LastTime = t
			}
		}
	}
	pe.Data = &nodediagv1.ProbeEvidence_Pods{Pods: &nodediagv1.Pods{Containers: all}}
	return pe, nil
}

// parsePodDir splits a pod log directory name, "<namespace>_<pod>_<uid>".
// None of the three can contain "_" (namespaces and pod names are DNS
// labels or subdomains, UIDs are UUIDs or, for static pods, hex digests).
func parsePodDir(name string) (namespace, pod, uid string, ok bool) {
	if !utf8.ValidString(name) {
		return "", "", "", false
	}
	parts := strings.Split(name, "_")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], parts[2], true
}

// podsStatic says whether a pod is one of this control plane's static pods:
// a kube-system pod named <component>-<suffix> where the suffix is the
// node's name, or where the component's manifest is in
// /etc/kubernetes/manifests and the UID is the kubelet's hash of a manifest
// (32 hex digits; an API pod's UID is a UUID), which tells a static
// "etcd-node-1" from a DaemonSet's "etcd-backup-x7k2p" when the kubelet's
// node name is not the host name.
func podsStatic(ns, pod, uid, node string, manifests map[string]bool) bool {
	if ns != "kube-system" {
		return false
	}
	for _, comp := range podsComponents {
		suffix, ok := strings.CutPrefix(pod, comp+"-")
		if !ok || suffix == "" {
			continue
		}
		if node != "" && suffix == node {
			return true
		}
		if manifests[comp] && podsManifestUID(uid) {
			return true
		}
	}
	return false
}

// podsManifestUID says whether uid is the kubelet's MD5 of a manifest
// (pkg/kubelet/config: applyDefaults), as static pods have.
func podsManifestUID(uid string) bool {
	if len(uid) != 32 {
		return false
	}
	for i := 0; i < len(uid); i++ {
		if c := uid[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// podsNodeName is the name the kubelet gives the node by default: the host
// name, lower-cased (the kernel's on a live host, /etc/hostname otherwise);
// "" when unknown.
func podsNodeName(h *host.Host) string {
	names := []string{osEtcHostname}
	if h.Live() {
		names = []string{osKernelHost, osEtcHostname}
	}
	for _, name := range names {
		if b, _, err := h.ReadFileLimit(name, 4<<10); err == nil {
			if n := strings.ToLower(strings.TrimSpace(string(b))); n != "" && !strings.ContainsAny(n, " \n") {
				return n
			}
		}
	}
	return ""
}

// podsManifests returns the components whose static pod manifest is in
// /etc/kubernetes/manifests ("etcd" for etcd.yaml).
func podsManifests(h *host.Host, pe *nodediagv1.ProbeEvidence) map[string]bool {
	out := map[string]bool{}
	ents, err := h.ReadDir(podsManifestsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return out
	}
	if err != nil {
		probe.Unreadable(pe, podsManifestsDir, err)
		return out
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") {
			continue // the kubelet ignores dot files
		}
		for _, ext := range []string{".yaml", ".yml", ".json"} {
			if base, ok := strings.CutSuffix(name, ext); ok {
				out[base] = true
			}
		}
	}
	return out
}

// podsFile is a log file of a container.
type podsFile struct {
	name string
	n    uint32
	// rotation is the suffix after "<n>.log." ("20240501-000140",
	// "20240501-000140.gz"), "" for the live "<n>.log".
	rotation string
	// readable: "<n>.log" or an uncompressed rotation; gzipped ones and
	// the .tmp of a compression in progress are listed, not read.
	readable bool
}

// podsFiles picks the kubelet's log files among a container directory's
// entries, oldest first: by <n>, then the rotations by time, then the live
// <n>.log.
func podsFiles(ents []fs.DirEntry) []podsFile {
	var out []podsFile
	for _, e := range ents {
		if e.IsDir() {
			continue
		}
		if f, ok := parsePodsFile(e.Name()); ok {
			out = append(out, f)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.n != b.n {
			return a.n < b.n
		}
		if (a.rotation == "") != (b.rotation == "") {
			return b.rotation == ""
		}
		return a.rotation < b.rotation
	})
	return out
}

// parsePodsFile parses "<n>.log" and "<n>.log.<suffix>" (the kubelet's own
// pattern, ^(\d+)\.log(\..*)?, in calcRestartCountByLogDir).
func parsePodsFile(name string) (podsFile, bool) {
	num, rest, ok := strings.Cut(name, ".log")
	if !ok || num == "" || !utf8.ValidString(rest) {
		return podsFile{}, false
	}
	n, err := strconv.ParseUint(num, 10, 32)
	if err != nil || strings.TrimLeft(num, "0123456789") != "" {
		return podsFile{}, false
	}
	f := podsFile{name: name, n: uint32(n)}
	switch {
	case rest == "":
		f.readable = true
	case strings.HasPrefix(rest, "."):
		f.rotation = rest[1:]
		_, err := time.Parse("20060102-150405", f.rotation)
		f.readable = err == nil
	default:
		return podsFile{}, false
	}
	return f, true
}

// podsLatest returns the file to read for the latest run (the newest
// readable file of the highest <n>) and for the run before it (the newest
// readable file of the highest lower <n>); either may be nil.
func podsLatest(files []podsFile) (latest, prev *podsFile) {
	if len(files) == 0 {
		return nil, nil
	}
	top := files[len(files)-1].n
	for i := len(files) - 1; i >= 0; i-- {
		f := &files[i]
		if !f.readable {
			continue
		}
		switch {
		case f.n == top && latest == nil:
			latest = f
		case f.n < top && prev == nil:
			prev = f
		}
	}
	return latest, prev
}

// podsReadLog reads and excerpts one container log file; a failure is
// recorded and gives nil.
func podsReadLog(h *host.Host, pe *nodediagv1.ProbeEvidence, file, container string, head, tail int64) *nodediagv1.LogExcerpt {
	first, last, size, skipped, err := h.ReadHeadTail(file, head, tail)
	if err != nil {
		probe.Unreadable(pe, file, err)
		return nil
	}
	return excerptCRI(file, container, first, last, size, skipped)
}

// criLine is one line of a container log in the CRI format
// (k8s.io/cri-api: "<RFC 3339 time> <stream> <tag> <message>", the tag "F"
// for a full line or "P" for a part that the next line of the same stream
// continues; more tags may follow the first, after ":").
type criLine struct {
	time    time.Time
	stream  string
	partial bool
	msg     string
}

// errCRILine is the error of a line that is not in the CRI log format.
var errCRILine = errors.New("not a CRI log line")

// parseCRILine parses one line (without its newline) as the kubelet's log
// reader does (pkg/kubelet/kuberuntime/logs: parseCRILog), except that a
// line ending right after its tag is a full, empty message.
func parseCRILine(b []byte) (criLine, error) {
	var l criLine
	ts, rest, ok := bytes.Cut(b, []byte(" "))
	if !ok {
		return l, fmt.Errorf("%w: no stream after the time", errCRILine)
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return l, fmt.Errorf("%w: time %q", errCRILine, clipBytes(ts, 40))
	}
	stream, rest, ok := bytes.Cut(rest, []byte(" "))
	if !ok {
		return l, fmt.Errorf("%w: no tag after the stream", errCRILine)
	}
	switch s := string(stream); s {
	case "stdout", "stderr":
		l.stream = s
	default:
		return l, fmt.Errorf("%w: stream %q", errCRILine, clipBytes(stream, 40))
	}
	tag, msg, _ := bytes.Cut(rest, []byte(" "))
	first, _, _ := bytes.Cut(tag, []byte(":"))
	switch string(first) {
	case "F":
	case "P":
		l.partial = true
	default:
		return l, fmt.Errorf("%w: tag %q", errCRILine, clipBytes(tag, 40))
	}
	l.time = t.UTC()
	l.msg = string(msg)
	return l, nil
}

func clipBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// podsCandidate is a message of a container log that may be kept.
type podsCandidate struct {
	seq        int // order of its first line in the log
	n, fromEnd int32
	msg        string
	time       time.Time
	inferred   bool
	notable    bool
	cut        bool
}

// podsKeeper keeps, of one container log, the notable messages
// (logline.Notable: the first podsKeepFirst and the last podsKeepLast) and
// the last podsContext messages whatever they say. Memory stays bounded
// whatever the log's length.
type podsKeeper struct {
	first   []podsCandidate
	last    [podsKeepLast]podsCandidate
	lastN   int
	ring    [podsContext]podsCandidate
	ringN   int
	dropped int64
}

// add offers a complete message; c.seq orders it in the log (a joined
// message is complete after the lines that start later messages).
func (k *podsKeeper) add(c podsCandidate) {
	if c.notable {
		if len(k.first) < podsKeepFirst {
			k.first = append(k.first, c)
		} else {
			if k.lastN >= podsKeepLast {
				k.dropped++
			}
			k.last[k.lastN%podsKeepLast] = c
			k.lastN++
		}
	}
	k.ring[k.ringN%podsContext] = c
	k.ringN++
}

// kept returns the kept messages in log order, and how many notable ones
// were dropped.
func (k *podsKeeper) kept() []podsCandidate {
	out := append([]podsCandidate(nil), k.first...)
	for i := max(0, k.lastN-podsKeepLast); i < k.lastN; i++ {
		out = append(out, k.last[i%podsKeepLast])
	}
	for i := max(0, k.ringN-podsContext); i < k.ringN; i++ {
		if c := k.ring[i%podsContext]; !c.notable {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].seq < out[j].seq })
	return out
}

// excerptCRI keeps the messages of one container log (CRI format) that
// matter. head is the file's start (the whole file when skipped is 0) and
// tail its end when the middle, skipped bytes long, was not read.
//
// Lines are numbered from 1 in the head; the tail's lines have n 0 and
// n_from_end (as excerptLog's). Partial lines ("P") are joined with the
// lines that continue them on the same stream, up to the full one ("F");
// the message takes the number and time of its first line. A message still
// open where the head ends, or at the end of the file, is kept as it is. A
// line that is not in the CRI format is kept verbatim, with the time of the
// message before it (time_inferred). Each kept line's text is the message,
// without the CRI prefix; program is the container.
func excerptCRI(source, container string, head, tail []byte, size, skipped int64) *nodediagv1.LogExcerpt {
	ex := &nodediagv1.LogExcerpt{
		Source:       source,
		Kind:         "pod",
		SizeBytes:    size,
		Truncated:    skipped > 0,
		SkippedBytes: skipped,
	}
	var (
		k        podsKeeper
		seq      int
		keys     redact.KeyBlock
		lastTime time.Time // of the last timed line, for untimed ones
		first    time.Time
		last     time.Time
	)
	type open struct {
		c     podsCandidate
		parts strings.Builder
	}
	pending := map[string]*open{}
	emit := func(c podsCandidate) {
		// A private key printed by a container spans lines that no
		// single-line redaction recognises: drop them here.
		c.msg = keys.Line(strings.TrimSuffix(c.msg, "\r"))
		c.notable = logline.Notable(c.msg)
		k.add(c)
	}
	flush := func() {
		for _, s := range []string{"stdout", "stderr"} {
			if o := pending[s]; o != nil {
				o.c.msg = o.parts.String()
				emit(o.c)
				delete(pending, s)
			}
		}
	}
	seeTime := func(t time.Time) {
		if first.IsZero() {
			first = t
		}
		last, lastTime = t, t
	}
	add := func(raw string, n, fromEnd int32, cut bool) {
		ex.TotalLines++
		l, err := parseCRILine([]byte(raw))
		if err != nil {
			c := podsCandidate{seq: seq, n: n, fromEnd: fromEnd, msg: raw, cut: cut}
			seq++
			if !lastTime.IsZero() {
				c.time, c.inferred = lastTime, true
			}
			emit(c)
			return
		}
		seeTime(l.time)
		if o := pending[l.stream]; o != nil {
			o.parts.WriteString(l.msg)
			o.c.cut = o.c.cut || cut
			if !l.partial {
				o.c.msg = o.parts.String()
				emit(o.c)
				delete(pending, l.stream)
			}
			return
		}
		c := podsCandidate{seq: seq, n: n, fromEnd: fromEnd, msg: l.msg, time: l.time, cut: cut}
		seq++
		if !l.partial {
			emit(c)
			return
		}
		o := &open{c: c}
		o.parts.WriteString(l.msg)
		pending[l.stream] = o
	}

	hs := string(head)
	nHead := logsCountLines(hs)
	cutHead := skipped > 0 && !strings.HasSuffix(hs, "\n")
	logsEachLine(hs, func(i int, raw string) {
		add(raw, int32(i+1), 0, cutHead && i == nHead-1)
	})
	flush()
	if skipped > 0 {
		// The first tail line starts somewhere in the middle: drop it.
		t := string(tail)
		if i := strings.IndexByte(t, '\n'); i >= 0 {
			t = t[i+1:]
		} else {
			t = ""
		}
		lastTime = time.Time{} // nothing is known of the time of the middle
		nTail := logsCountLines(t)
		logsEachLine(t, func(i int, raw string) {
			add(raw, 0, int32(nTail-i), false)
		})
		flush()
	}
	for _, c := range k.kept() {
		l := &nodediagv1.LogLine{N: c.n, NFromEnd: c.fromEnd, Text: logsText(c.msg, c.cut), Program: container, TimeInferred: c.inferred}
		if !c.time.IsZero() {
			l.Time = timestamppb.New(c.time)
		}
		ex.Lines = append(ex.Lines, l)
	}
	ex.DroppedLines = k.dropped
	if !first.IsZero() {
		ex.FirstTime, ex.LastTime = timestamppb.New(first), timestamppb.New(last)
	}
	return ex
}
