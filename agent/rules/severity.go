package rules

// Severities and confidences, and every comparison of them: the one place
// that knows their order (the report, the collector and the ranking ask
// here).

// Severities of a finding, weakest first.
const (
	Info     = "info"
	Warning  = "warning"
	Error    = "error"
	Critical = "critical"
)

// Confidences of a finding, weakest first.
const (
	Low    = "low"
	Medium = "medium"
	High   = "high"
)

// Severity is a finding's severity ("info" .. "critical"); an unknown one
// ranks below info.
type Severity string

var severityRank = map[Severity]int{Info: 1, Warning: 2, Error: 3, Critical: 4}

// Rank orders severities: the stronger, the higher.
func (s Severity) Rank() int { return severityRank[s] }

// AtLeast says whether s is at least min.
func (s Severity) AtLeast(min Severity) bool { return s.Rank() >= min.Rank() }

// Above says whether s is stronger than o.
func (s Severity) Above(o Severity) bool { return s.Rank() > o.Rank() }

// Valid says whether s is one of the four severities.
func (s Severity) Valid() bool { return s.Rank() > 0 }

// SeverityAtLeast says whether severity s is at least min.
func SeverityAtLeast(s, min string) bool { return Severity(s).AtLeast(Severity(min)) }

// Confidence is a finding's confidence ("low" .. "high").
type Confidence string

var confidenceRank = map[Confidence]int{Low: 1, Medium: 2, High: 3}

// Rank orders confidences: the surer, the higher.
func (c Confidence) Rank() int { return confidenceRank[c] }

// Below says whether c is less sure than o.
func (c Confidence) Below(o Confidence) bool { return c.Rank() < o.Rank() }
