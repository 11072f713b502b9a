package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"filippo.io/age"

	"github.com/nodediag/nodediag/agent/bundle"
	"github.com/nodediag/nodediag/agent/report"
)

const collectUsage = `Usage: nodediag-agent collect --bundle FILE.tar.gz [flags]

Check the host as check does, then write one file to carry out of an
air-gapped site and analyse elsewhere (nodediag analyze FILE): the report
with its evidence, and copies of the files behind the findings and of the
node's kubelet, runtime and bootstrap configuration and logs, bounded in
size, redacted (private keys, bootstrap tokens, passwords, SAS tokens,
credentials), with a manifest of what was collected, withheld, skipped,
unreadable and redacted. Nothing on the node changes but FILE.

--recipient age1... (repeatable) encrypts the bundle to those age public
keys; nodediag analyze --identity FILE opens it.

The last line on stdout names the bundle: "bundle: FILE (N members, B bytes)".
Exit codes: 0 no finding at error or above, 1 at least one, 2 the bundle
could not be written (FILE exists: remove it or pick another name).

Flags:
`

func runCollect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o checkOptions
	var out string
	var recipients listFlag
	var maxBytes, maxFile int64
	fs := flag.NewFlagSet("collect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), collectUsage)
		fs.PrintDefaults()
	}
	fs.StringVar(&out, "bundle", "", "the bundle `FILE` to write (.tar.gz; never overwritten)")
	fs.Var(&recipients, "recipient", "encrypt the bundle to this age public key `age1...` (repeatable)")
	fs.Int64Var(&maxBytes, "max-bytes", bundle.DefaultMaxBytes, "bound on the bundle's uncompressed contents; files beyond it are listed as skipped")
	fs.Int64Var(&maxFile, "max-file-bytes", bundle.DefaultMaxFileBytes, "the most of one file copied (a log's newest part)")
	checkFlags(fs, &o)
	o.warn = stderr
	o.output = "json"
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "nodediag-agent collect: "+format+"\n", a...)
		return ExitUsage
	}
	switch {
	case fs.NArg() > 0:
		return fail("unexpected arguments %q", fs.Args())
	case out == "":
		return fail("--bundle FILE is required")
	case maxBytes <= 0 || maxFile <= 0:
		return fail("--max-bytes and --max-file-bytes must be positive")
	case maxBytes > bundle.MaxKeptBytes/2 || maxFile > bundle.MaxMemberBytes:
		// analyze keeps at most MaxKeptBytes of a bundle's members, the
		// report among them: a bundle it would read in part is not made.
		return fail("--max-bytes is at most %d and --max-file-bytes at most %d: nodediag analyze reads at most %d bytes of a bundle, its report included", bundle.MaxKeptBytes/2, bundle.MaxMemberBytes, bundle.MaxKeptBytes)
	}
	var rs []age.Recipient
	for _, s := range recipients {
		r, err := age.ParseX25519Recipient(s)
		if err != nil {
			return fail("--recipient %q: %v", s, err)
		}
		rs = append(rs, r)
	}
	// Refuse an existing file before the check: a bundle is evidence, and
	// replacing one by mistake loses it.
	if _, err := os.Lstat(out); err == nil {
		return fail("%s exists: remove it or pick another name", out)
	}
	c, err := newChecker(o)
	if err != nil {
		return fail("%v", err)
	}
	r, h, err := c.runHost(ctx)
	if err != nil {
		return fail("%v", err)
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fail("%v", err)
	}
	m, err := bundle.Write(f, h, r, bundle.Options{MaxBytes: maxBytes, MaxFileBytes: maxFile, Recipients: rs})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(out)
		return fail("writing %s: %v", out, err)
	}
	fi, err := os.Stat(out)
	if err != nil {
		return fail("%v", err)
	}
	fmt.Fprintln(stdout, report.Summary(r))
	for _, p := range m.Unreadable {
		fmt.Fprintf(stdout, "not read: %s: %s\n", p.Source, p.Reason)
	}
	if n := len(m.Withheld); n > 0 {
		fmt.Fprintf(stdout, "withheld: %d file(s) that hold keys or credentials (listed in the manifest)\n", n)
	}
	if n := len(m.Skipped); n > 0 {
		fmt.Fprintf(stdout, "skipped: %d file(s): absent, binary or over the size bounds (listed in the manifest)\n", n)
	}
	redacted := 0
	for _, rd := range m.Redacted {
		redacted += len(rd.Lines)
	}
	enc := ""
	if len(rs) > 0 {
		enc = fmt.Sprintf(", encrypted to %d recipient(s)", len(rs))
	}
	abs, _ := filepath.Abs(out)
	fmt.Fprintf(stdout, "bundle: %s (%d members, %d bytes, %d line(s) redacted%s)\n", abs, len(m.Members)+1, fi.Size(), redacted, enc)
	return report.ExitCode(r)
}
