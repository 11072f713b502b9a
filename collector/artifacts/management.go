package artifacts

import (
	"fmt"
	"io"

	"github.com/nodediag/nodediag/collector/incident"
)

// Limits of the management side read.
const (
	// maxManagementFile bounds what is read of one events, controller or
	// activity log.
	maxManagementFile = 64 << 20
	// maxManagementLines bounds the lines (events, activity events) kept
	// per file.
	maxManagementLines = 20_000
)

// objectLogs reads the management side of the tree (controller logs,
// events.log, Azure activity logs) into the lines that name Cluster API
// objects: the evidence of Machines their nodes cannot give.
func (r *Result) objectLogs() []incident.ObjectLog {
	var out []incident.ObjectLog
	for _, p := range r.Tree.ActivityLogs {
		f, _, err := openRegular(p)
		if err != nil {
			r.Problems = append(r.Problems, err.Error())
			continue
		}
		evs, probs := ActivityFailures(io.LimitReader(f, maxManagementFile), maxManagementLines)
		f.Close()
		for _, pr := range probs {
			r.Problems = append(r.Problems, fmt.Sprintf("%s: %s", p, pr))
		}
		for _, e := range evs {
			objs := activityObjects(e.ResourceID)
			if len(objs) == 0 {
				continue
			}
			text := fmt.Sprintf("%s %s %s on %s: %s", e.Level, e.Operation, e.Status, e.ResourceID, e.Message)
			out = append(out, incident.ObjectLog{Source: fmt.Sprintf("%s (event %d)", p, e.Index), Time: e.Time,
				Controller: "the Azure activity log, " + e.Operation, Text: text, Error: activityError(e.Message), Objects: objs})
		}
	}
	return out
}
