package artifacts

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nodediag/nodediag/collector/incident"
)

// CAPZ's collectActivityLogs (test/e2e/azure_clusterproxy.go) writes each
// event of the resource group's last two hours (Policy ones dropped) as
// json.MarshalIndent of armmonitor.EventData, one after another: not an
// array, not one per line. The type conversion it makes (myEventData)
// drops EventData's own MarshalJSON, so the top-level keys are Go's field
// names (Level, Status, ResourceID, EventTimestamp, Properties), while the
// nested LocalizableStrings keep theirs ({"value": ..., "localizedValue":
// ...}).

// ActivityEvent is one failed operation of an Azure activity log.
type ActivityEvent struct {
	Time time.Time
	// Level is "Error" or "Critical" (or "Warning"); Operation and Status
	// the operation's name and status ("Failed").
	Level, Operation, Status, SubStatus string
	// ResourceID is the ARM ID the operation was on; Message the
	// properties' statusMessage (the cloud's error, as JSON text) or the
	// description.
	ResourceID, Message string
	// Index is the event's position in the file (1-based).
	Index int
}

type localizable struct {
	Value          string `json:"value"`
	LocalizedValue string `json:"localizedValue"`
}

func (l *localizable) text() string {
	if l == nil {
		return ""
	}
	if l.Value != "" {
		return l.Value
	}
	return l.LocalizedValue
}

type activityJSON struct {
	Level          string             `json:"Level"`
	OperationName  *localizable       `json:"OperationName"`
	Status         *localizable       `json:"Status"`
	SubStatus      *localizable       `json:"SubStatus"`
	ResourceID     string             `json:"ResourceID"`
	EventTimestamp string             `json:"EventTimestamp"`
	Description    string             `json:"Description"`
	Properties     map[string]*string `json:"Properties"`
}

// maxActivityMessage bounds an event's message.
const maxActivityMessage = 2 << 10

// ActivityFailures reads an activity log file's events (at most max) and
// returns the failed ones: level Error or Critical, or status Failed. A
// stream that stops decoding ends the read with a problem; the events
// before it are returned.
func ActivityFailures(r io.Reader, max int) ([]ActivityEvent, []string) {
	dec := json.NewDecoder(r)
	var out []ActivityEvent
	var probs []string
	for i := 1; i <= max; i++ {
		var e activityJSON
		if err := dec.Decode(&e); err != nil {
			if !errors.Is(err, io.EOF) {
				probs = append(probs, fmt.Sprintf("event %d: %v: the rest was not read", i, err))
			}
			return out, probs
		}
		status := e.Status.text()
		if e.Level != "Error" && e.Level != "Critical" && !strings.EqualFold(status, "Failed") {
			continue
		}
		ev := ActivityEvent{Level: e.Level, Operation: e.OperationName.text(), Status: status, SubStatus: e.SubStatus.text(),
			ResourceID: e.ResourceID, Index: i}
		if t, err := time.Parse(time.RFC3339Nano, e.EventTimestamp); err == nil {
			ev.Time = t
		}
		if m := e.Properties["statusMessage"]; m != nil {
			ev.Message = *m
		}
		if ev.Message == "" {
			ev.Message = e.Description
		}
		if len(ev.Message) > maxActivityMessage {
			ev.Message = ev.Message[:maxActivityMessage] + "…"
		}
		out = append(out, ev)
	}
	probs = append(probs, fmt.Sprintf("more than %d events: the rest was not read", max))
	return out, probs
}

// resourceName returns the last name of an ARM ID of the given resource
// type ("virtualMachines", "virtualMachineScaleSets"), "" when it names
// another type.
func resourceName(id, typ string) string {
	parts := strings.Split(id, "/")
	for i := len(parts) - 2; i >= 0; i-- {
		if strings.EqualFold(parts[i], typ) {
			return parts[i+1]
		}
	}
	return ""
}

// activityError is the cloud's error of an event's statusMessage
// ({"status":"Failed","error":{"code":"C","message":"M"}}: "C: M"), else
// the message as it is.
func activityError(msg string) string {
	var sm struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
			Details []struct {
				Code    string `json:"code"`
				Message string `json:"message"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(msg), &sm) != nil || sm.Error.Code == "" && sm.Error.Message == "" {
		return msg
	}
	code, text := sm.Error.Code, sm.Error.Message
	if len(sm.Error.Details) > 0 && sm.Error.Details[0].Message != "" {
		code, text = sm.Error.Details[0].Code, sm.Error.Details[0].Message
	}
	return strings.TrimPrefix(code+": "+text, ": ")
}

// activityObjects are the Cluster API objects an event's resource stands
// for: CAPZ names a VM after its AzureMachine and a scale set after its
// AzureMachinePool.
func activityObjects(id string) []incident.ObjectRef {
	if vm := resourceName(id, "virtualMachines"); vm != "" && resourceName(id, "virtualMachineScaleSets") == "" {
		return []incident.ObjectRef{{Kind: "AzureMachine", Name: vm}}
	}
	if ss := resourceName(id, "virtualMachineScaleSets"); ss != "" {
		return []incident.ObjectRef{{Kind: "AzureMachinePool", Name: ss}}
	}
	return nil
}
