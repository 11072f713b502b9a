package probes

import (
	"testing"
	"time"

	"github.com/nodediag/nodediag/agent/journal"
)

// The state of a unit from what systemd wrote about it, in today's wording
// and in that of systemd before 236 (CentOS 7).
func TestUnitFromJournalWordings(t *testing.T) {
	cases := []struct {
		name           string
		msgs           []string
		active, result string
		restarts       uint32
		code, status   int32
	}{
		{
			name: "systemd 252: crash loop",
			msgs: []string{
				"Started kubelet.service - kubelet: The Kubernetes Node Agent.",
				"kubelet.service: Main process exited, code=exited, status=1/FAILURE",
				"kubelet.service: Failed with result 'exit-code'.",
				"kubelet.service: Scheduled restart job, restart counter is at 7.",
			},
			active: "activating", result: "exit-code", restarts: 7, code: 1, status: 1,
		},
		{
			name: "systemd 219: failed to spawn, then the start limit",
			msgs: []string{
				"Started Kubernetes Kubelet Server.",
				"kubelet.service: main process exited, code=exited, status=200/CHDIR",
				"Unit kubelet.service entered failed state.",
				"kubelet.service failed.",
				"kubelet.service holdoff time over, scheduling restart.",
				"Started Kubernetes Kubelet Server.",
				"kubelet.service: main process exited, code=exited, status=200/CHDIR",
				"kubelet.service holdoff time over, scheduling restart.",
				"start request repeated too quickly for kubelet.service",
				"Failed to start Kubernetes Kubelet Server.",
			},
			active: "failed", result: "start-limit-hit", restarts: 2, code: 1, status: 200,
		},
		{
			name:   "systemd 219: stopped",
			msgs:   []string{"Started Kubernetes Kubelet Server.", "Stopped Kubernetes Kubelet Server."},
			active: "inactive",
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			u := unitFromJournal{unit: "kubelet.service"}
			at := time.Date(2017, 8, 15, 14, 52, 29, 0, time.UTC)
			for i, m := range c.msgs {
				u.see(&journal.Entry{Realtime: at.Add(time.Duration(i) * time.Second)}, m)
			}
			st := u.state()
			if st == nil {
				t.Fatal("no state")
			}
			if st.ActiveState != c.active || st.Result != c.result || st.NRestarts != c.restarts || st.ExecMainCode != c.code || st.ExecMainStatus != c.status {
				t.Errorf("state %s result %q restarts %d code %d status %d; want %s %q %d %d %d",
					st.ActiveState, st.Result, st.NRestarts, st.ExecMainCode, st.ExecMainStatus, c.active, c.result, c.restarts, c.code, c.status)
			}
		})
	}
}
