// Package probes holds the agent's probes, one per file. Each reads one
// aspect of the node through agent/host and returns Evidence; none decides
// what a problem means (that is agent/rules).
package probes

import "github.com/nodediag/nodediag/agent/probe"

// All returns every probe, in a fixed order (the order of the report's probe
// list). Adding a probe is adding a file and a line here.
func All() []probe.Probe {
	return []probe.Probe{
		osInfo{},
		kubeletConfig{},
		binaries{},
		kubeadm{},
		cloudInit{},
		logs{},
		journalProbe{},
		units{},
		pods{},
		filesystems{},
		swap{},
		certificates{},
		cni{},
		containerdConfig{},
		runtimeProbe{},
		registriesProbe{},
	}
}
