package probes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"

	"github.com/nodediag/nodediag/agent/host"
	"github.com/nodediag/nodediag/agent/probe"
	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// The CNI directories containerd's CRI plugin uses by default (conf_dir and
// bin_dir of plugins."io.containerd.grpc.v1.cri".cni). A CNI add-on (Calico's
// install-cni container, Cilium's agent) writes its config into the conf
// dir and its plugin binaries into the bin dir once its pod runs on the node.
const (
	cniConfDir = "/etc/cni/net.d"
	cniBinDir  = "/opt/cni/bin"
)

// cniKubernetesTraces: without any of them the root is not a Kubernetes node
// and a missing CNI config means nothing.
var cniKubernetesTraces = []string{"/etc/kubernetes", "/var/lib/kubelet"}

// cniMaxConfig caps the size of a CNI config read; real ones are a few KiB.
const cniMaxConfig = 1 << 20

// cni reports the CNI network configurations (*.conf, *.conflist, *.json in
// the conf dir, as libcni's ConfFiles lists them) and the plugin binaries of
// the bin dir. A node with no conf dir still gets evidence (that is the
// finding); a root that shows no Kubernetes at all is skipped.
type cni struct{}

func (cni) Name() string { return "cni" }

func (cni) Run(ctx context.Context, h *host.Host) (*nodediagv1.ProbeEvidence, error) {
	pe := &nodediagv1.ProbeEvidence{}
	data := &nodediagv1.CNI{ConfDir: cniConfDir, BinDir: cniBinDir}

	ents, err := h.ReadDir(cniConfDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		kube := false
		for _, p := range cniKubernetesTraces {
			ok, err := h.Exists(p)
			if err != nil {
				probe.Unreadable(pe, p, err)
			}
			kube = kube || ok || err != nil
		}
		if !kube {
			return nil, fmt.Errorf("%w: no %s, and no Kubernetes on this root (%s)", probe.ErrNotApplicable, cniConfDir, strings.Join(cniKubernetesTraces, ", "))
		}
	case err != nil:
		probe.Unreadable(pe, cniConfDir, err)
		// It exists: only its listing failed.
		data.ConfDirPresent = true
	default:
		data.ConfDirPresent = true
		for _, e := range ents {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if e.IsDir() || !cniIsConfigName(e.Name()) {
				continue
			}
			p := path.Join(cniConfDir, e.Name())
			b, truncated, err := h.ReadFileLimit(p, cniMaxConfig)
			if err != nil {
				if errors.Is(err, host.ErrNotRegular) {
					continue
				}
				probe.Unreadable(pe, p, err)
				continue
			}
			c := &nodediagv1.CNIConfig{Path: p}
			if truncated {
				c.ParseError = fmt.Sprintf("larger than %d bytes", cniMaxConfig)
			} else {
				parseCNIConfig(e.Name(), b, c)
			}
			data.Configs = append(data.Configs, c)
		}
	}

	bins, err := h.ReadDir(cniBinDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		probe.Unreadable(pe, cniBinDir, err)
	default:
		data.BinDirPresent = true
		for _, e := range bins {
			p := path.Join(cniBinDir, e.Name())
			fi, err := h.Stat(p) // follows symlinks inside the root
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
				continue
			}
			data.Plugins = append(data.Plugins, e.Name())
		}
	}
	pe.Data = &nodediagv1.ProbeEvidence_Cni{Cni: data}
	return pe, nil
}

// cniIsConfigName says whether libcni loads a file of this name: the
// extensions containerd's go-cni asks ConfFiles for.
func cniIsConfigName(name string) bool {
	switch path.Ext(name) {
	case ".conf", ".conflist", ".json":
		return true
	}
	return false
}

// parseCNIConfig fills c from the file name and content of a CNI network
// configuration, with the checks libcni and go-cni make when the runtime
// loads it: a *.conflist needs a name and a non-empty plugins list of typed
// plugins; a *.conf or *.json is one network and needs a type (a conflist
// written into a .conf file fails there). What fails goes into
// c.ParseError; what parsed is kept.
func parseCNIConfig(name string, b []byte, c *nodediagv1.CNIConfig) {
	var raw struct {
		Name       *string `json:"name"`
		CNIVersion string  `json:"cniVersion"`
		Type       string  `json:"type"`
		Plugins    []struct {
			Type string `json:"type"`
		} `json:"plugins"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&raw); err != nil {
		c.ParseError = cniJSONError(b, err)
		return
	}
	if dec.More() {
		c.ParseError = "invalid JSON: data after the top-level value"
		return
	}
	if raw.Name != nil {
		c.Name = *raw.Name
	}
	c.CniVersion = raw.CNIVersion
	if strings.HasSuffix(name, ".conflist") {
		for _, p := range raw.Plugins {
			c.Types = append(c.Types, p.Type)
		}
		switch {
		case raw.Name == nil:
			c.ParseError = "error parsing configuration list: no name"
		case len(raw.Plugins) == 0:
			c.ParseError = "no plugins in the list"
		default:
			for i, p := range raw.Plugins {
				if p.Type == "" {
					c.ParseError = fmt.Sprintf("plugin #%d has no type", i)
					break
				}
			}
		}
		return
	}
	if raw.Type == "" {
		c.ParseError = "network type not found"
		if len(raw.Plugins) > 0 {
			c.ParseError += " (a plugin list in a ." + strings.TrimPrefix(path.Ext(name), ".") + " file: name it *.conflist)"
		}
		return
	}
	c.Types = []string{raw.Type}
}

// cniJSONError describes a JSON error with its line, the way an operator
// finds it in the file.
func cniJSONError(b []byte, err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at line %d: %v", 1+bytes.Count(b[:min(int(se.Offset), len(b))], []byte("\n")), err)
	case errors.As(err, &te):
		return fmt.Sprintf("invalid JSON at line %d: %v", 1+bytes.Count(b[:min(int(te.Offset), len(b))], []byte("\n")), err)
	case errors.Is(err, io.EOF):
		return "empty file"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated JSON: " + err.Error()
	}
	return "invalid JSON: " + err.Error()
}
