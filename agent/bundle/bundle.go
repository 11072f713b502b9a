// Package bundle is the offline evidence bundle of `nodediag-agent collect
// --bundle FILE.tar.gz`: what an air-gapped host's operator carries out on a
// file and analyses elsewhere (`nodediag analyze FILE`).
//
// A bundle is a gzip-compressed tar whose members come in this order:
//
//	manifest.json   what was collected (every member with its size and
//	                SHA-256), what could not be read or was withheld or
//	                skipped, what was redacted, the agent's version
//	report.json     the agent's report with its Evidence (as check
//	                --output json writes it): what the rules judge again
//	files/<path>    raw copies of the files that support the findings and
//	                of the node's key configuration and bootstrap logs,
//	                each redacted line by line, a log's tail kept when it
//	                is larger than the per-file cap
//
// Everything written is redacted (private keys, bootstrap tokens, passwords,
// SAS tokens, credentials in URLs and configuration); files that exist to
// hold secrets (private keys, kubeconfigs, certificate directories) are
// withheld and listed. Members are regular files only, named in sorted
// order, with fixed owners and modes and the evidence's time as their time.
// The bundle may be encrypted to age recipients (Write's Recipients).
package bundle

import (
	"time"
)

// Format names this layout in the manifest. A reader meeting another
// version says so and reads what it can.
const Format = "nodediag-bundle/v1"

// Member names.
const (
	ManifestName = "manifest.json"
	ReportName   = "report.json"
	FilesDir     = "files/"
)

// Default bounds of a bundle.
const (
	// DefaultMaxFileBytes is the most of one file copied (a log's tail).
	DefaultMaxFileBytes = 4 << 20
	// DefaultMaxBytes bounds the uncompressed members together; files that
	// do not fit are listed as skipped, the report always fits.
	DefaultMaxBytes = 64 << 20
)

// Manifest describes a bundle. Its JSON is a contract: add, never rename.
type Manifest struct {
	Format string `json:"format"`
	Agent  struct {
		Version  string `json:"version"`
		Revision string `json:"revision,omitempty"`
	} `json:"agent"`
	Node     string `json:"node"`
	Hostname string `json:"hostname,omitempty"`
	// Root is the host's root as the agent was given it (--root).
	Root string `json:"root"`
	// CollectedAt is the evidence's clock.
	CollectedAt time.Time `json:"collected_at"`
	// Members are every member after the manifest, in the tar's order.
	Members []Member `json:"members"`
	// Unreadable are what the probes and the bundle could not read.
	Unreadable []Problem `json:"unreadable,omitempty"`
	// Withheld are files left out because they exist to hold secrets.
	Withheld []Problem `json:"withheld,omitempty"`
	// Skipped are files left out by the size bounds or as binary.
	Skipped []Problem `json:"skipped,omitempty"`
	// Redacted lists, per member, the lines where a secret was replaced.
	Redacted []Redaction `json:"redacted,omitempty"`
	Limits   struct {
		MaxFileBytes int64 `json:"max_file_bytes"`
		MaxBytes     int64 `json:"max_bytes"`
	} `json:"limits"`
	// Notes say what a reader should know about the contents.
	Notes []string `json:"notes,omitempty"`
}

// Member is one file of the bundle.
type Member struct {
	Name string `json:"name"`
	// Source is the host path a files/ member was copied from.
	Source string `json:"source,omitempty"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Truncated: only the last Size bytes of the file's SourceSize are
	// copied (the newest part of a log).
	Truncated  bool  `json:"truncated,omitempty"`
	SourceSize int64 `json:"source_size,omitempty"`
}

// Problem is something not in the bundle, and why.
type Problem struct {
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// Redaction is where secrets were replaced in one member.
type Redaction struct {
	Member string `json:"member"`
	// Lines are 1-based line numbers of the member (report.json: none,
	// its strings are redacted field by field).
	Lines []int `json:"lines,omitempty"`
}
