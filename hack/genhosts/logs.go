package main

import (
	"fmt"
	"strings"
	"time"
)

// syslog renders /var/log/syslog lines: RFC 3339 high-precision timestamps
// (rsyslog on Ubuntu 24.04) or the traditional "May  1 00:01:40" form
// (Ubuntu 22.04, journalctl's short output).
type syslog struct {
	host        string
	traditional bool
	b           strings.Builder
}

func (s *syslog) line(t time.Time, prog string, pid int, msg string) {
	ts := t.UTC().Format("2006-01-02T15:04:05.000000-07:00")
	if s.traditional {
		ts = t.UTC().Format("Jan _2 15:04:05")
	}
	fmt.Fprintf(&s.b, "%s %s %s[%d]: %s\n", ts, s.host, prog, pid, msg)
}

// klog renders a klog header line as the kubelet writes it.
func klog(sev byte, t time.Time, pid int, file, msg string) string {
	return fmt.Sprintf("%c%s %7d %s] %s", sev, t.UTC().Format("0102 15:04:05.000000"), pid, file, msg)
}

// logrus renders a containerd line.
func logrus(t time.Time, level, msg string) string {
	return fmt.Sprintf("time=%q level=%s msg=%s", t.UTC().Format("2006-01-02T15:04:05.000000000Z"), level, msg)
}

func (s *syslog) String() string { return s.b.String() }

// every calls f at each step from start (inclusive) to end (exclusive).
func every(start, end time.Time, step time.Duration, f func(t time.Time, i int)) {
	i := 0
	for t := start; t.Before(end); t = t.Add(step) {
		f(t, i)
		i++
	}
}

// kubeletStartupNoise is what a healthy kubelet writes in its first minute:
// known bootstrap transients that must never become a finding.
func kubeletStartupNoise(s *syslog, start time.Time, pid int, node, endpoint string) {
	s.line(start, "systemd", 1, "Started kubelet.service - kubelet: The Kubernetes Node Agent.")
	s.line(start.Add(300*time.Millisecond), "kubelet", pid, klog('I', start.Add(300*time.Millisecond), pid, "server.go:484", `"Kubelet version" kubeletVersion="v1.32.3"`))
	s.line(start.Add(2*time.Second), "kubelet", pid, klog('I', start.Add(2*time.Second), pid, "kubelet_node_status.go:76", `"Attempting to register node" node="`+node+`"`))
	for i := 0; i < 3; i++ {
		t := start.Add(time.Duration(2+i*7) * time.Second)
		s.line(t, "kubelet", pid, klog('E', t, pid, "kubelet_node_status.go:108", `"Unable to register node with API server" err="Post \"https://`+endpoint+`/api/v1/nodes\": dial tcp 10.0.0.100:6443: connect: connection refused" node="`+node+`"`))
		s.line(t.Add(200*time.Millisecond), "kubelet", pid, klog('E', t.Add(200*time.Millisecond), pid, "kubelet.go:3002", `"Error getting node" err="node \"`+node+`\" not found"`))
	}
	for i := 0; i < 4; i++ {
		t := start.Add(time.Duration(5+i*20) * time.Second)
		s.line(t, "kubelet", pid, klog('E', t, pid, "kubelet.go:3008", `"Container runtime network not ready" networkReady="NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: cni plugin not initialized"`))
	}
	t := start.Add(25 * time.Second)
	s.line(t, "kubelet", pid, klog('I', t, pid, "kubelet_node_status.go:79", `"Successfully registered node" node="`+node+`"`))
}
