// Package logline understands single lines of the text logs found on a
// Kubernetes node: where a line's own timestamp is, which program wrote it
// (for syslog-style files), and whether it is worth keeping as evidence.
//
// It is pure: no I/O, no clock. Parse is given the reference time that stands
// for "when the log was last written" because several formats (klog,
// traditional syslog, journalctl's short output) carry no year.
//
// Formats recognised (each with a real example):
//
//	klog          E0501 00:01:40.123456    1234 file.go:12] msg
//	logrus        time="2024-05-01T00:01:40.123456789Z" level=error msg="..."
//	rfc3339       2024-05-01T00:01:40.123456+00:00 host kubelet[123]: msg   (rsyslog high precision, journalctl -o short-iso)
//	syslog        May  1 00:01:40 host kubelet[1234]: msg                   (traditional syslog, journalctl short / short-precise)
//	cloud-init    2024-05-01 00:01:40,123 - util.py[WARNING]: msg           (/var/log/cloud-init.log)
//	cloud-init-stage  Cloud-init v. 24.1.3 running 'modules:final' at Wed, 01 May 2024 00:01:38 +0000. Up 35.00 seconds.
//	              Cloud-init v. 24.1.3 finished at Wed, 01 May 2024 00:01:42 +0000. Datasource DataSourceAzure.  Up 39.1 seconds
//	datetime      2024-05-01 00:01:40 ERROR 404: Not Found.                 (wget, and other "date time" prefixes)
//	capi-script   +++ [2024-05-01T00:01:40+00:00] running 'kubeadm join ...' (CAPI's kubeadm-bootstrap-script)
//
// A syslog or rfc3339 prefix may wrap a klog or logrus message (kubelet and
// containerd lines in /var/log/syslog); the outer timestamp is then the
// line's time, and the level comes from the inner message.
package logline

import (
	"strings"
	"time"
)

// Format names the format a line's timestamp was recognised in.
type Format string

// Formats of Line.Format.
const (
	FormatNone           Format = ""
	FormatKlog           Format = "klog"
	FormatLogrus         Format = "logrus"
	FormatRFC3339        Format = "rfc3339"
	FormatSyslog         Format = "syslog"
	FormatCloudInit      Format = "cloud-init"
	FormatCloudInitStage Format = "cloud-init-stage"
	FormatDateTime       Format = "datetime"
	FormatCAPIScript     Format = "capi-script"
)

// Levels of Line.Level, normalised from klog letters (I W E F), logrus
// levels and Python logging level names.
const (
	LevelDebug   = "debug"
	LevelInfo    = "info"
	LevelWarning = "warning"
	LevelError   = "error"
	LevelFatal   = "fatal"
	LevelPanic   = "panic"
)

// Line is what Parse understood of one log line.
type Line struct {
	// Time is the line's own timestamp, in UTC; zero when HasTime is false.
	Time    time.Time
	HasTime bool
	// Format is the format Time was read from (FormatNone without a time).
	Format Format
	// Program is the syslog tag ("kubelet" of "host kubelet[1234]: "), set
	// for syslog-style lines and for cloud-init's console prefix.
	Program string
	// PID is the process ID of the syslog tag, "" when absent.
	PID string
	// Level is the severity the line itself states (klog letter, logrus
	// level, cloud-init's [WARNING]), "" when it states none.
	Level string
	// Message is the text after the recognised prefixes (timestamp, host and
	// tag, klog header). It is the whole line when no prefix is recognised.
	Message string

	// span is where, in the text given to Parse, the timestamp that Time
	// was read from is (start, end); used by the tests to re-render it.
	span [2]int
}

// yearSlack is how far after the reference time a yearless timestamp may
// fall before it is taken to belong to the previous year: clocks and
// timezones differ a little between the writer and the reference.
const yearSlack = 24 * time.Hour

// Parse reads the timestamp, program and message of one line of text
// (without its newline). ref stands for when the log was last written; it
// gives the year to formats that have none: the year of ref, or the year
// before when that would put the line more than a day after ref. Times
// without a zone are taken as UTC; ParseIn takes them in the host's zone.
func Parse(text string, ref time.Time) Line {
	return ParseIn(text, ref, time.UTC)
}

// clock is what dates a line without a year or a zone.
type clock struct {
	ref time.Time
	loc *time.Location
}

// ParseIn is Parse for a host whose local zone is loc: syslog, klog,
// cloud-init.log and wget write local time without saying which (on a
// UTC+2 host "May  1 02:02:00" is 00:02 UTC).
func ParseIn(text string, ref time.Time, loc *time.Location) Line {
	l := Line{Message: text}
	if text == "" {
		return l
	}
	if loc == nil {
		loc = time.UTC
	}
	c := clock{ref: ref.UTC(), loc: loc}
	msgStart := 0
	switch ch := text[0]; {
	case ch >= '0' && ch <= '9':
		msgStart = parseDigitStart(text, &l, c.loc)
	case ch >= 'A' && ch <= 'S' && parseSyslogStart(text, c, &l):
		msgStart = len(text) - len(l.Message)
		// The kernel's printk time ("[7438185.617430] "), which syslog
		// keeps and the journal does not: the message is what follows.
		if l.Program == "kernel" && strings.HasPrefix(l.Message, "[") {
			if i := strings.Index(l.Message, "] "); i > 0 && i < 20 && isUptime(l.Message[1:i]) {
				l.Message = l.Message[i+2:]
				msgStart += i + 2
			}
		}
	case ch == 'C' && strings.HasPrefix(text, "Cloud-init v. "):
		parseCloudInitStage(text, &l)
		return l
	case (ch == '+' || ch == '!') && parseCAPIScript(text, &l, c.loc):
		return l
	case ch == '[' && strings.HasPrefix(text, cloudInitSyslogTag):
		// cloud-init's syslog handler: "[CLOUDINIT] file[LEVEL]: msg", or
		// with its log file's own prefix "[CLOUDINIT]2024-05-01 10:00:00,123
		// - file[LEVEL]: msg": the rest reads as cloud-init's log does.
		off := len(cloudInitSyslogTag)
		if off < len(text) && text[off] == ' ' {
			off++
		}
		inner := ParseIn(text[off:], ref, loc)
		if inner.HasTime {
			inner.span = [2]int{inner.span[0] + off, inner.span[1] + off}
		}
		if inner.Level == "" {
			inner.Level, inner.Message = cloudInitLevel(text[off:])
		}
		return inner
	case ch == '[':
		// Kernel console prefix: "[   27.43] cloud-init[1047]: msg" (no
		// absolute time).
		if i := strings.Index(text, "] "); i > 0 && i < 20 && isUptime(text[1:i]) {
			rest := text[i+2:]
			if prog, pid, msg, ok := cutTag(rest); ok {
				l.Program, l.PID, l.Message = prog, pid, msg
				msgStart = len(text) - len(msg)
			}
		}
	}
	parseInner(text, msgStart, c, &l)
	return l
}

// cloudInitSyslogTag starts what cloud-init's syslog handler writes
// (05_logging.cfg: "[CLOUDINIT] %(filename)s[%(levelname)s]: %(message)s").
const cloudInitSyslogTag = "[CLOUDINIT]"

// cloudInitLevel is the level and message of "file[LEVEL]: msg"; no level
// and s itself when the text does not start so.
func cloudInitLevel(s string) (string, string) {
	i := strings.IndexByte(s, '[')
	j := strings.Index(s, "]: ")
	if i <= 0 || j < i || strings.ContainsAny(s[:i], " \t") {
		return "", s
	}
	lv := level(s[i+1 : j])
	if lv == "" {
		return "", s
	}
	return lv, s[j+3:]
}

// parseDigitStart handles lines starting with a digit: RFC 3339 (rsyslog,
// journalctl -o short-iso), cloud-init.log, and "date time" prefixes. It
// returns where the message starts.
func parseDigitStart(text string, l *Line, loc *time.Location) int {
	if len(text) < 19 || !isDate(text[:10]) {
		return 0
	}
	switch text[10] {
	case 'T':
		end := strings.IndexByte(text, ' ')
		if end < 0 {
			end = len(text)
		}
		t, ok := parseRFC3339(text[:end], loc)
		if !ok {
			return 0
		}
		l.setTime(t, FormatRFC3339, 0, end)
		rest := strings.TrimPrefix(text[end:], " ")
		l.Message = rest
		if host, after, ok := strings.Cut(rest, " "); ok && !strings.ContainsAny(host, "[:") {
			if prog, pid, msg, ok := cutTag(after); ok {
				l.Program, l.PID, l.Message = prog, pid, msg
			}
		} else if prog, pid, msg, ok := cutTag(rest); ok {
			// No host field: "2024-05-01T00:01:40Z kubelet[1]: msg".
			l.Program, l.PID, l.Message = prog, pid, msg
		}
		return len(text) - len(l.Message)
	case ' ':
		if !isClock(text[11:19]) {
			return 0
		}
		end := 19
		frac := 0
		if end < len(text) && (text[end] == ',' || text[end] == '.') {
			j := end + 1
			for j < len(text) && j-end <= 9 && isDigit(text[j]) {
				j++
			}
			if j > end+1 {
				frac = j - end - 1
				end = j
			}
		}
		if end < len(text) && text[end] != ' ' {
			return 0
		}
		layout := "2006-01-02 15:04:05"
		if frac > 0 {
			layout += string(text[19]) + strings.Repeat("0", frac)
		}
		t, err := time.ParseInLocation(layout, text[:end], loc)
		if err != nil {
			return 0
		}
		rest := strings.TrimPrefix(text[end:], " ")
		// cloud-init.log: "<time> - <file>[<LEVEL>]: <msg>".
		if strings.HasPrefix(rest, "- ") {
			if i := strings.Index(rest, "]: "); i > 0 {
				if j := strings.IndexByte(rest[:i], '['); j > 2 {
					l.setTime(t, FormatCloudInit, 0, end)
					l.Level = level(rest[j+1 : i])
					l.Message = rest[i+3:]
					return len(text) - len(l.Message)
				}
			}
		}
		l.setTime(t, FormatDateTime, 0, end)
		l.Message = rest
		return len(text) - len(rest)
	}
	return 0
}

// parseSyslogStart handles "May  1 00:01:40 host tag[pid]: msg" and
// "May 01 00:01:40.123456 host tag: msg".
func parseSyslogStart(text string, c clock, l *Line) bool {
	if len(text) < 15 || text[3] != ' ' {
		return false
	}
	mon, ok := months[text[:3]]
	if !ok {
		return false
	}
	// Day: " 1", "01" or "1" followed by a space.
	i := 4
	var day int
	switch {
	case text[i] == ' ' && isDigit(text[i+1]):
		day, i = int(text[i+1]-'0'), i+2
	case isDigit(text[i]) && isDigit(text[i+1]):
		day, i = int(text[i]-'0')*10+int(text[i+1]-'0'), i+2
	case isDigit(text[i]) && text[i+1] == ' ':
		day, i = int(text[i]-'0'), i+1
	default:
		return false
	}
	if i >= len(text) || text[i] != ' ' || len(text) < i+9 || !isClock(text[i+1:i+9]) {
		return false
	}
	clock := text[i+1 : i+9]
	end := i + 9
	nsec := 0
	if end < len(text) && text[end] == '.' {
		j := end + 1
		for j < len(text) && j-end <= 9 && isDigit(text[j]) {
			j++
		}
		if j > end+1 {
			nsec = fracNanos(text[end+1 : j])
			end = j
		}
	}
	if end < len(text) && text[end] != ' ' {
		return false
	}
	hh, mm, ss := atoi2(clock[0:2]), atoi2(clock[3:5]), atoi2(clock[6:8])
	t, ok := yearless(c, mon, day, hh, mm, ss, nsec)
	if !ok {
		return false
	}
	l.setTime(t, FormatSyslog, 0, end)
	rest := strings.TrimPrefix(text[end:], " ")
	l.Message = rest
	if _, after, ok := strings.Cut(rest, " "); ok {
		if prog, pid, msg, ok := cutTag(after); ok {
			l.Program, l.PID, l.Message = prog, pid, msg
		}
	}
	return true
}

// parseCloudInitStage handles cloud-init's stage header ("Cloud-init v. V
// running 'stage' at <RFC 1123Z>. Up N seconds.") and footer ("Cloud-init v.
// V finished at <RFC 1123Z>. Datasource D.  Up N seconds").
func parseCloudInitStage(text string, l *Line) {
	i := strings.Index(text, " running '")
	if i >= 0 {
		if j := strings.Index(text[i:], "' at "); j >= 0 {
			i += j + len("' at ")
		} else {
			return
		}
	} else if i = strings.Index(text, " finished at "); i >= 0 {
		i += len(" finished at ")
	} else {
		return
	}
	end := strings.Index(text[i:], ". ")
	if end < 0 {
		end = len(text) - i
		if strings.HasSuffix(text, ".") {
			end--
		}
	}
	t, err := time.Parse(time.RFC1123Z, text[i:i+end])
	if err != nil {
		return
	}
	l.setTime(t, FormatCloudInitStage, i, i+end)
}

// parseCAPIScript handles the lines of Cluster API's kubeadm bootstrap retry
// script: "+++ [<time>] msg" and "!!! [<time>] msg".
func parseCAPIScript(text string, l *Line, loc *time.Location) bool {
	if !strings.HasPrefix(text, "+++ [") && !strings.HasPrefix(text, "!!! [") {
		return false
	}
	end := strings.IndexByte(text, ']')
	if end < 0 {
		return false
	}
	t, ok := parseRFC3339(text[5:end], loc)
	if !ok {
		return false
	}
	l.setTime(t, FormatCAPIScript, 5, end)
	if text[0] == '!' {
		l.Level = LevelError
	}
	l.Message = strings.TrimPrefix(text[end+1:], " ")
	return true
}

// parseInner reads a klog header or logrus fields at the start of the
// message (text[off:]): the level always, the time when the line has none
// yet.
func parseInner(text string, off int, c clock, l *Line) {
	msg := text[off:]
	if msg == "" {
		return
	}
	switch ch := msg[0]; {
	case ch == 'I' || ch == 'W' || ch == 'E' || ch == 'F':
		if n, t, ok := klogHeader(msg, c); ok {
			l.Level = klogLevels[ch]
			if !l.HasTime && !t.IsZero() {
				l.setTime(t, FormatKlog, off+1, off+21)
			}
			l.Message = msg[n:]
			return
		}
		if lv, ok := logrusTTY(msg); ok {
			l.Level = lv
		}
	case ch == 't' && strings.HasPrefix(msg, `time="`):
		end := strings.IndexByte(msg[6:], '"')
		if end < 0 {
			return
		}
		end += 6
		t, ok := parseRFC3339(msg[6:end], c.loc)
		if ok && !l.HasTime {
			l.setTime(t, FormatLogrus, off+6, off+end)
		}
		rest := strings.TrimPrefix(msg[end+1:], " ")
		if lv, ok := logrusLevel(msg); ok {
			l.Level = lv
		}
		l.Message = rest
	default:
		if lv, ok := logrusTTY(msg); ok {
			l.Level = lv
		}
	}
}

// logrusLevel is the level of a logrus line, msg starting with time="...":
// the word after "level=" right after the quoted time, and whether there
// is one.
func logrusLevel(msg string) (string, bool) {
	end := strings.IndexByte(msg[6:], '"')
	if end < 0 {
		return "", false
	}
	rest := strings.TrimPrefix(msg[6+end+1:], " ")
	v, ok := strings.CutPrefix(rest, "level=")
	if !ok {
		return "", false
	}
	if sp := strings.IndexByte(v, ' '); sp >= 0 {
		v = v[:sp]
	}
	return level(v), true
}

// klogHeader parses "Lmmdd hh:mm:ss.uuuuuu threadid file:line] " and returns
// the length of the header. Its time has no year: it comes from ref.
func klogHeader(s string, c clock) (int, time.Time, bool) {
	n, ok := klogHeaderLen(s)
	if !ok {
		return 0, time.Time{}, false
	}
	mon, day := atoi2(s[1:3]), atoi2(s[3:5])
	t, ok := yearless(c, time.Month(mon), day, atoi2(s[6:8]), atoi2(s[9:11]), atoi2(s[12:14]), fracNanos(s[15:21]))
	if !ok {
		// A header with an impossible date is still a header: keep the
		// level and message, without a time.
		return n, time.Time{}, true
	}
	return n, t, true
}

// klogHeaderLen is the length of the klog header s starts with, and whether
// it does (its letter is not checked).
func klogHeaderLen(s string) (int, bool) {
	// L mmdd space hh:mm:ss . uuuuuu = 1+4+1+8+1+6 = 21 bytes.
	if len(s) < 23 || !isDigits(s[1:5]) || s[5] != ' ' || !isClock(s[6:14]) || s[14] != '.' || !isDigits(s[15:21]) || s[21] != ' ' {
		return 0, false
	}
	// Thread ID (padded), then "file:line] ".
	i := 22
	for i < len(s) && s[i] == ' ' {
		i++
	}
	j := i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	if j == i || j >= len(s) || s[j] != ' ' {
		return 0, false
	}
	k := strings.Index(s[j+1:], "] ")
	if k < 0 {
		if strings.HasSuffix(s, "]") && strings.IndexByte(s[j+1:], ' ') < 0 {
			k = len(s) - j - 2
		} else {
			return 0, false
		}
	}
	file := s[j+1 : j+1+k]
	if !strings.Contains(file, ":") || strings.ContainsRune(file, ' ') {
		return 0, false
	}
	n := j + 1 + k + 2
	if n > len(s) {
		n = len(s)
	}
	return n, true
}

// logrusTTY reads the level of logrus's terminal format ("ERRO[0000] msg",
// crictl and ctr print it).
func logrusTTY(s string) (string, bool) {
	if len(s) < 6 || s[4] != '[' {
		return "", false
	}
	switch s[:4] {
	case "DEBU":
		return LevelDebug, true
	case "INFO":
		return LevelInfo, true
	case "WARN":
		return LevelWarning, true
	case "ERRO":
		return LevelError, true
	case "FATA":
		return LevelFatal, true
	case "PANI":
		return LevelPanic, true
	}
	return "", false
}

var klogLevels = map[byte]string{'I': LevelInfo, 'W': LevelWarning, 'E': LevelError, 'F': LevelFatal}

// level normalises a level name ("WARNING", "warn", "error").
func level(s string) string {
	switch strings.ToLower(strings.Trim(s, `"`)) {
	case "debug", "trace":
		return LevelDebug
	case "info", "notice":
		return LevelInfo
	case "warning", "warn":
		return LevelWarning
	case "error", "err":
		return LevelError
	case "fatal", "critical", "crit":
		return LevelFatal
	case "panic":
		return LevelPanic
	}
	return ""
}

func (l *Line) setTime(t time.Time, f Format, start, end int) {
	l.Time, l.HasTime, l.Format, l.span = t.UTC(), true, f, [2]int{start, end}
}

// cutTag splits "tag[pid]: msg" or "tag: msg".
func cutTag(s string) (prog, pid, msg string, ok bool) {
	i := strings.IndexAny(s, "[: ")
	if i <= 0 || !isTag(s[:i]) {
		return "", "", "", false
	}
	prog = s[:i]
	switch s[i] {
	case '[':
		j := strings.IndexByte(s[i:], ']')
		if j < 0 || !isDigits(s[i+1:i+j]) {
			return "", "", "", false
		}
		pid = s[i+1 : i+j]
		i += j + 1
		if i >= len(s) || s[i] != ':' {
			return "", "", "", false
		}
	case ' ':
		return "", "", "", false
	}
	// s[i] == ':'
	msg = strings.TrimPrefix(s[i+1:], " ")
	return prog, pid, msg, true
}

func isTag(s string) bool {
	if len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || strings.IndexByte("-_./@()", c) >= 0) {
			return false
		}
	}
	return true
}

// parseRFC3339 accepts RFC 3339 with or without fraction, with "Z", "+hh:mm"
// or "+hhmm" (journalctl -o short-iso), or without a zone (UTC).
func parseRFC3339(s string, loc *time.Location) (time.Time, bool) {
	if len(s) < 19 || !isDate(s[:10]) || s[10] != 'T' || !isClock(s[11:19]) {
		return time.Time{}, false
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999Z0700", "2006-01-02T15:04:05.999999999"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			// A zone offset can move year 0000 or 9999 out of the
			// four-digit years; no log line is that old or that new.
			if y := t.UTC().Year(); y < 1 || y > 9999 {
				return time.Time{}, false
			}
			return t, true
		}
	}
	return time.Time{}, false
}

// yearless builds the time of a timestamp without a year: the year of ref,
// or the one before when the result would be more than yearSlack after ref.
// ok is false for a date that exists in neither year (Feb 29, Apr 31).
func yearless(c clock, mon time.Month, day, hh, mm, ss, nsec int) (time.Time, bool) {
	ref := c.ref
	if mon < 1 || mon > 12 || day < 1 || hh > 23 || mm > 59 || ss > 60 {
		return time.Time{}, false
	}
	for _, y := range []int{ref.Year(), ref.Year() - 1} {
		t := time.Date(y, mon, day, hh, mm, ss, nsec, c.loc)
		if t.Day() != day || t.Month() != mon {
			continue // normalised: the day does not exist in y
		}
		if y == ref.Year() && t.After(ref.Add(yearSlack)) {
			continue
		}
		return t, true
	}
	return time.Time{}, false
}

var months = map[string]time.Month{
	"Jan": time.January, "Feb": time.February, "Mar": time.March, "Apr": time.April,
	"May": time.May, "Jun": time.June, "Jul": time.July, "Aug": time.August,
	"Sep": time.September, "Oct": time.October, "Nov": time.November, "Dec": time.December,
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return true
}

// isDate: "2006-01-02".
func isDate(s string) bool {
	return len(s) == 10 && isDigits(s[0:4]) && s[4] == '-' && isDigits(s[5:7]) && s[7] == '-' && isDigits(s[8:10])
}

// isClock: "15:04:05".
func isClock(s string) bool {
	return len(s) == 8 && isDigits(s[0:2]) && s[2] == ':' && isDigits(s[3:5]) && s[5] == ':' && isDigits(s[6:8])
}

// isUptime: "   27.43" (kernel console timestamps).
func isUptime(s string) bool {
	s = strings.TrimLeft(s, " ")
	whole, frac, ok := strings.Cut(s, ".")
	return ok && isDigits(whole) && isDigits(frac)
}

func atoi2(s string) int { return int(s[0]-'0')*10 + int(s[1]-'0') }

// fracNanos converts the digits of a fraction of a second to nanoseconds.
func fracNanos(digits string) int {
	n := 0
	for i := 0; i < 9; i++ {
		n *= 10
		if i < len(digits) {
			n += int(digits[i] - '0')
		}
	}
	return n
}
