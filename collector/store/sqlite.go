package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	nodediagv1 "github.com/nodediag/nodediag/proto/nodediag/v1"
)

// FileName is the database's name inside the collector's data directory.
// SQLite keeps two companions next to it while it is open: FileName+"-wal"
// (the write-ahead log, which holds the latest commits until a checkpoint
// copies them into the database) and FileName+"-shm" (its index). Copying
// or removing the database without its -wal file loses reports.
const FileName = "nodediag.db"

const (
	// SchemaVersion is the schema this version of nodediag writes, kept in
	// the database's user_version. Open migrates an older database to it
	// and refuses a newer one.
	SchemaVersion = 1
	// applicationID marks the SQLite file as nodediag's (PRAGMA
	// application_id, "ndDg"), so that Open never migrates, converts or
	// writes to another program's database named nodediag.db.
	applicationID = 0x6e644467
)

// Defaults of Options.
const (
	DefaultHistory = 10
	DefaultMaxAge  = 30 * 24 * time.Hour
)

const (
	// queueSize bounds the Puts waiting for the writer; a Put beyond it
	// waits (or gives up with its context): backpressure on the agents'
	// streams instead of unbounded memory.
	queueSize = 1024
	// maxBatch and maxBatchBytes bound one commit: a larger transaction
	// delays every Put in it and grows the write-ahead log.
	maxBatch      = 512
	maxBatchBytes = 16 << 20
	// maxDecoded bounds the decompression of one stored report.
	maxDecoded = 256 << 20
	// agePruneEvery is how often the writer deletes reports older than
	// MaxAge (at most; a smaller MaxAge prunes more often), and
	// agePruneChunk how many rows one pruning transaction deletes, so that
	// pruning a large backlog never holds up Puts for long.
	agePruneEvery = time.Minute
	agePruneChunk = 2000
	// busyTimeout is how long a connection waits for a lock held by
	// another connection (a reader starting while the writer checkpoints,
	// another process) before failing with SQLITE_BUSY.
	busyTimeout = 10 * time.Second
	// readConns bounds the concurrent readers (Nodes, Latest, History).
	readConns = 4
	// journalSizeLimit truncates the write-ahead log back to this size
	// after a checkpoint; without it, the file stays as large as the
	// largest backlog it ever held.
	journalSizeLimit = 64 << 20
)

// Errors of the SQLite store; test with errors.Is.
var (
	// ErrClosed is returned by the methods of a closed store.
	ErrClosed = errors.New("store closed")
	// ErrInvalidRecord is returned (wrapped) by Put for a record that
	// cannot be stored: no summary, no node name, no report.
	ErrInvalidRecord = errors.New("invalid record")
	// ErrNotStore is returned (wrapped) by Open when the file at the path
	// is not a nodediag database: not SQLite at all, corrupt, or another
	// program's SQLite database.
	ErrNotStore = errors.New("not a nodediag database")
	// ErrNewerSchema is returned (wrapped) by Open for a database written
	// by a newer version of nodediag, whose schema this version does not
	// know: it is left untouched.
	ErrNewerSchema = errors.New("database schema is newer than this nodediag")
)

// Durability says what a report whose Put returned nil survives.
type Durability int

const (
	// DurabilityDefault is PowerLoss.
	DurabilityDefault Durability = iota
	// ProcessCrash: a committed report survives the collector being killed
	// (kill -9, OOM kill, panic), not a crash of the machine. SQLite's WAL
	// mode with synchronous=NORMAL: a commit is write(2)s into the
	// write-ahead log, which the kernel keeps once the call returns; the
	// log is fsynced only at checkpoints. A power loss or kernel crash can
	// lose the last commits (never corrupt the database).
	ProcessCrash
	// PowerLoss: a committed report also survives a power loss or kernel
	// crash, as far as the disk honours fsync. WAL mode with
	// synchronous=FULL: each commit fsyncs the write-ahead log. Group
	// commit shares one fsync between all the Puts of a batch.
	PowerLoss
)

func (d Durability) String() string {
	switch d {
	case ProcessCrash:
		return "process-crash"
	case PowerLoss, DurabilityDefault:
		return "power-loss"
	}
	return fmt.Sprintf("Durability(%d)", int(d))
}

// Options tune an SQLite store. The zero value is the default.
type Options struct {
	// History is how many reports of each node are kept, the latest
	// included; older ones are deleted in the transaction that stores a
	// new one. Zero means DefaultHistory.
	History int
	// MaxAge: reports received longer ago than this are deleted, even a
	// node's latest, so that the nodes of a churning fleet (autoscaled,
	// replaced) are eventually forgotten and the database stays bounded by
	// the live fleet. Zero means DefaultMaxAge; negative keeps reports
	// whatever their age (History still bounds each node).
	MaxAge time.Duration
	// Durability: what a nil Put survives. Zero means PowerLoss.
	Durability Durability
}

func (o Options) withDefaults() (Options, error) {
	if o.History < 0 {
		return o, fmt.Errorf("store: history %d: want a positive count (0 for the default, %d)", o.History, DefaultHistory)
	}
	if o.History == 0 {
		o.History = DefaultHistory
	}
	if o.MaxAge == 0 {
		o.MaxAge = DefaultMaxAge
	}
	switch o.Durability {
	case DurabilityDefault:
		o.Durability = PowerLoss
	case ProcessCrash, PowerLoss:
	default:
		return o, fmt.Errorf("store: unknown durability %d", int(o.Durability))
	}
	return o, nil
}

// SQLite is the collector's embedded store: one SQLite database file (pure
// Go, modernc.org/sqlite, so that the collector stays a static binary) in
// the data directory.
//
// Writes go through a single writer goroutine that commits the Puts waiting
// in its queue as one transaction (group commit): the cost of a commit (and
// of its fsync under PowerLoss) is shared by every Put of the batch, and
// there is never contention between writers. Reports are stored as
// zstd-compressed protobuf, apart from the summary columns that Nodes reads.
// Readers use their own connections and never wait for the writer (WAL).
//
// Latest report of a node: the last one stored, except that a record with
// the same AgentStart as the node's latest and a lower Seq (an agent
// re-sending an older upload) goes into the history without replacing it.
// Clocks of different agent runs are not compared: a node whose clock went
// backwards across a reboot still shows its new reports.
type SQLite struct {
	path string
	opts Options
	rdb  *sql.DB // readers: query_only
	wdb  *sql.DB // the writer's single connection

	mu     sync.RWMutex // guards closed against sends on queue and new reads
	closed bool
	// reads counts the reads (Nodes, Latest, History) under way: Close
	// waits for them before closing rdb and the zstd decoder they use (a
	// DecodeAll racing the decoder's Close panics).
	reads sync.WaitGroup
	queue chan *putReq
	done  chan struct{} // closed when the writer has exited

	zenc *zstd.Encoder
	zdec *zstd.Decoder
	// encoding bounds the Puts encoding at once to the processors: a burst
	// of thousands of Puts (a sweep) then waits before marshalling, not
	// with a marshalled copy of its report each, for a zstd encoder.
	encoding chan struct{}

	// Prepared on wdb; used by the writer goroutine only.
	insReport, insData, upsertNode, prune *sql.Stmt
}

var _ Store = (*SQLite)(nil)

// Codecs of report_data.codec.
const (
	codecProto = 0 // protobuf as is (compression did not pay)
	codecZstd  = 1 // zstd-compressed protobuf
)

// schema[v-1] takes a database from version v-1 to v. Never edit an entry
// once released: add one.
var schema = []string{
	// 1: reports keeps the fleet table's columns of each stored report
	// (small rows: Nodes reads them without touching the blobs);
	// report_data its protobuf; nodes points at each node's latest.
	`
CREATE TABLE reports (
	id             INTEGER PRIMARY KEY,
	node           TEXT    NOT NULL,
	agent_start    INTEGER NOT NULL, -- Unix ns of the agent's start; 0: unknown
	seq            INTEGER NOT NULL,
	received_at    INTEGER NOT NULL, -- Unix ns
	machine_id     TEXT    NOT NULL,
	provider_id    TEXT    NOT NULL,
	agent_version  TEXT    NOT NULL,
	agent_revision TEXT    NOT NULL,
	reported_at    INTEGER,          -- Unix ns; NULL: not set
	top_id         TEXT    NOT NULL,
	top_title      TEXT    NOT NULL,
	top_severity   TEXT    NOT NULL,
	errors         INTEGER NOT NULL,
	warnings       INTEGER NOT NULL,
	request_id     TEXT    NOT NULL,
	UNIQUE (node, agent_start, seq)
);
CREATE INDEX reports_received_at ON reports (received_at);
CREATE TABLE report_data (
	id    INTEGER PRIMARY KEY,      -- reports.id
	codec INTEGER NOT NULL,         -- 0 protobuf, 1 zstd(protobuf)
	size  INTEGER NOT NULL,         -- bytes of the protobuf
	data  BLOB    NOT NULL
);
CREATE TRIGGER reports_delete AFTER DELETE ON reports BEGIN
	DELETE FROM report_data WHERE id = OLD.id;
END;
CREATE TABLE nodes (
	node        TEXT    PRIMARY KEY,
	report_id   INTEGER NOT NULL,  -- the latest report
	agent_start INTEGER NOT NULL,  -- its agent_start and seq
	seq         INTEGER NOT NULL
) WITHOUT ROWID;
`,
}

// Open opens the store in dir, creating dir (0700) and DIR/nodediag.db
// if needed, and migrating an older schema. It refuses, with an error
// wrapping ErrNotStore or ErrNewerSchema, a file that is not a nodediag
// database or that a newer nodediag wrote; such a file is left untouched.
func Open(dir string, opts Options) (*SQLite, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	path := filepath.Join(dir, FileName)
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("store: %s: %w: %s, not a file", path, ErrNotStore, fi.Mode().Type())
	} else if errors.Is(err, fs.ErrNotExist) {
		// Created 0600 before SQLite opens it: SQLite gives the -wal and
		// -shm files the database's mode, and the reports carry every
		// node's evidence.
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("store: %w", err)
		}
		if f != nil {
			f.Close()
		}
	}
	sync := "FULL"
	if opts.Durability == ProcessCrash {
		sync = "NORMAL"
	}
	// Per-connection settings go in the DSN, so that a connection that
	// database/sql replaces gets them too. journal_mode is a property of
	// the file: it is set once, in setup, after the file is known to be
	// ours.
	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=synchronous(%s)&_pragma=foreign_keys(0)",
		busyTimeout.Milliseconds(), sync)
	u := "file:" + escapePath(path) + "?"
	wdb, err := sql.Open("sqlite", u+common+"&_txlock=immediate"+fmt.Sprintf("&_pragma=journal_size_limit(%d)", journalSizeLimit))
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	wdb.SetConnMaxIdleTime(0)
	s := &SQLite{path: path, opts: opts, wdb: wdb}
	if err := s.setup(); err != nil {
		wdb.Close()
		return nil, err
	}
	// The file is ours: readable by its owner only, whatever made it
	// (an older version, a copy).
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		if err := os.Chmod(p, 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
			wdb.Close()
			return nil, fmt.Errorf("store: %w", err)
		}
	}
	rdb, err := sql.Open("sqlite", u+common+"&_pragma=query_only(1)")
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("store: %s: %w", path, err)
	}
	rdb.SetMaxOpenConns(readConns)
	rdb.SetMaxIdleConns(readConns)
	s.rdb = rdb
	if err := s.prepare(); err != nil {
		s.closeDBs()
		return nil, err
	}
	// EncodeAll and DecodeAll are safe for concurrent use; Puts compress
	// in their own goroutines, in parallel, before queueing.
	s.zenc, err = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)))
	s.encoding = make(chan struct{}, runtime.GOMAXPROCS(0))
	if err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("store: %w", err)
	}
	s.zdec, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxDecoded))
	if err != nil {
		s.closeDBs()
		return nil, fmt.Errorf("store: %w", err)
	}
	s.queue = make(chan *putReq, queueSize)
	s.done = make(chan struct{})
	go s.writer()
	return s, nil
}

// escapePath makes path safe inside a file: URI (SQLite decodes %XX).
func escapePath(path string) string {
	r := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23")
	return r.Replace(path)
}

// setup checks that the file is a nodediag database (or empty, or new),
// refuses a newer schema, migrates an older one, and turns on WAL mode.
func (s *SQLite) setup() error {
	ctx := context.Background()
	var appID, version, objects int64
	// The first statement that reads the file: a file that is not SQLite
	// fails here (SQLITE_NOTADB), before anything is written to it.
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA application_id").Scan(&appID); err != nil {
		return s.openErr(err)
	}
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return s.openErr(err)
	}
	if err := s.wdb.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&objects); err != nil {
		return s.openErr(err)
	}
	switch {
	case appID == 0 && version == 0 && objects == 0:
		// New (or empty) database.
	case appID != applicationID:
		return fmt.Errorf("store: %s: %w: a SQLite database of another program (application_id %#x, %d schema objects); use another --data-dir",
			s.path, ErrNotStore, appID, objects)
	case version > SchemaVersion:
		return fmt.Errorf("store: %s: %w: schema version %d, this nodediag knows up to %d; upgrade nodediag or use another --data-dir",
			s.path, ErrNewerSchema, version, SchemaVersion)
	}
	var mode string
	if err := s.wdb.QueryRowContext(ctx, "PRAGMA journal_mode=WAL").Scan(&mode); err != nil {
		return s.openErr(err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("store: %s: cannot turn on write-ahead logging (journal mode stays %q)", s.path, mode)
	}
	for v := version; v < SchemaVersion; v++ {
		if err := s.migrate(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

// migrate takes the schema from version from to from+1 in one transaction.
func (s *SQLite) migrate(ctx context.Context, from int64) error {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return s.openErr(err)
	}
	defer tx.Rollback()
	stmts := schema[from]
	if from == 0 {
		stmts += fmt.Sprintf("PRAGMA application_id = %d;\n", applicationID)
	}
	stmts += fmt.Sprintf("PRAGMA user_version = %d;\n", from+1)
	if _, err := tx.ExecContext(ctx, stmts); err != nil {
		return fmt.Errorf("store: %s: migrating the schema from version %d to %d: %w", s.path, from, from+1, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: %s: migrating the schema from version %d to %d: %w", s.path, from, from+1, err)
	}
	return nil
}

// openErr explains an error of Open: SQLite's "file is not a database"
// becomes ErrNotStore.
func (s *SQLite) openErr(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_NOTADB, sqlite3.SQLITE_CORRUPT:
			return fmt.Errorf("store: %s: %w: not SQLite or corrupt (%v); move it away or use another --data-dir", s.path, ErrNotStore, err)
		}
	}
	return fmt.Errorf("store: %s: %w", s.path, err)
}

func (s *SQLite) prepare() error {
	ctx := context.Background()
	var err error
	prep := func(q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		st, err = s.wdb.PrepareContext(ctx, q)
		return st
	}
	s.insReport = prep(`INSERT INTO reports (node, agent_start, seq, received_at, machine_id, provider_id,
		agent_version, agent_revision, reported_at, top_id, top_title, top_severity, errors, warnings, request_id)
		VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
		ON CONFLICT (node, agent_start, seq) DO NOTHING`)
	s.insData = prep(`INSERT INTO report_data (id, codec, size, data) VALUES (?1, ?2, ?3, ?4)`)
	// The new report becomes the latest unless it is an older upload of
	// the same agent run.
	s.upsertNode = prep(`INSERT INTO nodes (node, report_id, agent_start, seq) VALUES (?1, ?2, ?3, ?4)
		ON CONFLICT (node) DO UPDATE SET report_id = excluded.report_id, agent_start = excluded.agent_start, seq = excluded.seq
		WHERE NOT (nodes.agent_start = excluded.agent_start AND nodes.seq > excluded.seq)`)
	// Keep the History newest reports of the node (and its latest, which
	// is older in the re-sent case above).
	s.prune = prep(`DELETE FROM reports WHERE node = ?1
		AND id <= (SELECT id FROM reports WHERE node = ?1 ORDER BY id DESC LIMIT 1 OFFSET ?2)
		AND id <> (SELECT report_id FROM nodes WHERE node = ?1)`)
	if err != nil {
		return fmt.Errorf("store: %s: %w", s.path, err)
	}
	return nil
}

// row is a record ready for the database: encoded and compressed by Put,
// in the caller's goroutine.
type row struct {
	node                      string
	agentStart, seq, received int64
	machineID, providerID     string
	agentVersion, agentRev    string
	reportedAt                sql.NullInt64
	topID, topTitle, topSev   string
	errors, warnings          int64
	requestID                 string
	codec, size               int64
	data                      []byte
}

type putReq struct {
	ctx  context.Context
	row  row
	done chan error // buffered: the writer never blocks on it
}

func validate(rec *Record) error {
	switch {
	case rec == nil:
		return fmt.Errorf("store: put: %w: nil record", ErrInvalidRecord)
	case rec.Summary == nil:
		return fmt.Errorf("store: put: %w: no summary", ErrInvalidRecord)
	case rec.Summary.GetNodeName() == "":
		return fmt.Errorf("store: put: %w: no node name", ErrInvalidRecord)
	case rec.Report == nil && len(rec.Encoded) == 0:
		return fmt.Errorf("store: put %s: %w: no report", rec.Summary.GetNodeName(), ErrInvalidRecord)
	case rec.Seq > math.MaxInt64:
		return fmt.Errorf("store: put %s: %w: seq %d out of range", rec.Summary.GetNodeName(), ErrInvalidRecord, rec.Seq)
	}
	return nil
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

func (s *SQLite) encode(rec *Record) (row, error) {
	sum := rec.Summary
	b := rec.Encoded
	if len(b) == 0 {
		var err error
		if b, err = proto.Marshal(rec.Report); err != nil {
			return row{}, fmt.Errorf("store: put %s: encoding the report: %w", sum.GetNodeName(), err)
		}
	}
	codec, data := int64(codecProto), b
	if z := s.zenc.EncodeAll(b, make([]byte, 0, len(b)/4)); len(z) < len(b) {
		codec, data = codecZstd, z
	}
	received := rec.ReceivedAt
	if received.IsZero() {
		received = time.Now()
	}
	r := row{
		node:         sum.GetNodeName(),
		agentStart:   unixNano(rec.AgentStart),
		seq:          int64(rec.Seq),
		received:     received.UnixNano(),
		machineID:    sum.GetMachineId(),
		providerID:   sum.GetProviderId(),
		agentVersion: sum.GetAgent().GetVersion(),
		agentRev:     sum.GetAgent().GetRevision(),
		topID:        sum.GetTopId(),
		topTitle:     sum.GetTopTitle(),
		topSev:       sum.GetTopSeverity(),
		errors:       int64(sum.GetErrors()),
		warnings:     int64(sum.GetWarnings()),
		requestID:    sum.GetRequestId(),
		codec:        codec,
		size:         int64(len(b)),
		data:         data,
	}
	if sum.GetReportedAt() != nil {
		r.reportedAt = sql.NullInt64{Int64: sum.GetReportedAt().AsTime().UnixNano(), Valid: true}
	}
	return r, nil
}

// Put stores rec and returns when its transaction has committed (see
// Durability), or when ctx ends first: then it returns an error wrapping
// ctx.Err() and the caller must not acknowledge the report, which may or
// may not have been stored (putting it again is harmless). Putting a
// record whose (node, AgentStart, Seq) is stored already returns nil and
// changes nothing. A zero ReceivedAt is taken as now; Summary.Connected and
// Summary.LastSeen are not stored.
func (s *SQLite) Put(ctx context.Context, rec *Record) error {
	if err := validate(rec); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("store: put %s: %w", rec.Summary.GetNodeName(), err)
	}
	select {
	case s.encoding <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("store: put %s: waiting to encode: %w", rec.Summary.GetNodeName(), ctx.Err())
	}
	r, err := s.encode(rec)
	<-s.encoding
	if err != nil {
		return err
	}
	// The report is encoded: nothing below reads rec, so that the decoded
	// report can be collected while the Put waits for the writer.
	seq := rec.Seq
	rec = nil
	req := &putReq{ctx: ctx, row: r, done: make(chan error, 1)}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return fmt.Errorf("store: put %s: %w", r.node, ErrClosed)
	}
	select {
	case s.queue <- req:
		s.mu.RUnlock()
	case <-ctx.Done():
		s.mu.RUnlock()
		return fmt.Errorf("store: put %s seq %d: waiting for the writer: %w", r.node, seq, ctx.Err())
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		// A commit that finished at the same moment wins.
		select {
		case err := <-req.done:
			return err
		default:
		}
		return fmt.Errorf("store: put %s seq %d: waiting for the commit: %w", r.node, seq, ctx.Err())
	}
}

// writer is the only goroutine that writes: it commits what is queued, one
// batch per transaction, until Close closes the queue and it is drained.
func (s *SQLite) writer() {
	defer close(s.done)
	var tick <-chan time.Time
	if s.opts.MaxAge > 0 {
		t := time.NewTicker(min(agePruneEvery, max(s.opts.MaxAge/4, time.Second)))
		defer t.Stop()
		tick = t.C
		s.pruneOld()
	}
	batch := make([]*putReq, 0, maxBatch)
	for {
		var req *putReq
		var ok bool
		select {
		case req, ok = <-s.queue:
		case <-tick:
			s.pruneOld()
			continue
		}
		if !ok {
			return
		}
		batch = append(batch[:0], req)
		size := len(req.row.data)
	fill:
		for len(batch) < maxBatch && size < maxBatchBytes {
			select {
			case req, ok := <-s.queue:
				if !ok {
					break fill // commit, then see the closed queue above
				}
				batch = append(batch, req)
				size += len(req.row.data)
			default:
				break fill
			}
		}
		s.commit(batch)
		clear(batch) // let the reports go
	}
}

// commit stores batch in one transaction and answers each Put.
func (s *SQLite) commit(batch []*putReq) {
	live := batch[:0:0]
	for _, req := range batch {
		if err := req.ctx.Err(); err != nil {
			// Its Put has returned already (or is returning) the error.
			req.done <- err
			continue
		}
		live = append(live, req)
	}
	if len(live) == 0 {
		return
	}
	err := s.commitTx(live)
	for _, req := range live {
		req.done <- err
	}
}

func (s *SQLite) commitTx(batch []*putReq) (err error) {
	ctx := context.Background() // a batch commits or fails as a whole
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store: %s: begin: %w", s.path, err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	insReport, insData := tx.StmtContext(ctx, s.insReport), tx.StmtContext(ctx, s.insData)
	upsertNode, prune := tx.StmtContext(ctx, s.upsertNode), tx.StmtContext(ctx, s.prune)
	touched := make(map[string]struct{}, len(batch))
	for _, req := range batch {
		r := &req.row
		res, err := insReport.ExecContext(ctx, r.node, r.agentStart, r.seq, r.received, r.machineID, r.providerID,
			r.agentVersion, r.agentRev, r.reportedAt, r.topID, r.topTitle, r.topSev, r.errors, r.warnings, r.requestID)
		if err != nil {
			return fmt.Errorf("store: %s: put %s seq %d: %w", s.path, r.node, r.seq, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("store: %s: put %s seq %d: %w", s.path, r.node, r.seq, err)
		} else if n == 0 {
			continue // stored already
		}
		id, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("store: %s: put %s seq %d: %w", s.path, r.node, r.seq, err)
		}
		if _, err := insData.ExecContext(ctx, id, r.codec, r.size, r.data); err != nil {
			return fmt.Errorf("store: %s: put %s seq %d: %w", s.path, r.node, r.seq, err)
		}
		if _, err := upsertNode.ExecContext(ctx, r.node, id, r.agentStart, r.seq); err != nil {
			return fmt.Errorf("store: %s: put %s seq %d: %w", s.path, r.node, r.seq, err)
		}
		touched[r.node] = struct{}{}
	}
	for node := range touched {
		if _, err := prune.ExecContext(ctx, node, s.opts.History); err != nil {
			return fmt.Errorf("store: %s: pruning the history of %s: %w", s.path, node, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store: %s: commit: %w", s.path, err)
	}
	return nil
}

// pruneOld deletes the reports received more than MaxAge ago, a chunk per
// transaction, and repoints or forgets the nodes whose latest went. Errors
// are left for the next tick: pruning is not what Puts wait for.
func (s *SQLite) pruneOld() {
	cutoff := time.Now().Add(-s.opts.MaxAge).UnixNano()
	ctx := context.Background()
	for {
		n, err := s.pruneChunk(ctx, cutoff)
		if err != nil || n < agePruneChunk {
			return
		}
		// Let queued Puts in between chunks.
		if len(s.queue) > 0 {
			return
		}
	}
}

func (s *SQLite) pruneChunk(ctx context.Context, cutoff int64) (int64, error) {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM reports WHERE id IN
		(SELECT id FROM reports WHERE received_at < ?1 LIMIT ?2)`, cutoff, agePruneChunk)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return n, err
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM nodes WHERE NOT EXISTS
		(SELECT 1 FROM reports r WHERE r.node = nodes.node)`); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE nodes SET (report_id, agent_start, seq) =
		(SELECT id, agent_start, seq FROM reports r WHERE r.node = nodes.node ORDER BY id DESC LIMIT 1)
		WHERE NOT EXISTS (SELECT 1 FROM reports r WHERE r.id = nodes.report_id)`); err != nil {
		return 0, err
	}
	return n, tx.Commit()
}

const summaryCols = `r.node, r.machine_id, r.provider_id, r.agent_version, r.agent_revision, r.reported_at,
	r.top_id, r.top_title, r.top_severity, r.errors, r.warnings, r.request_id`

// summaryScanner scans the summaryCols of one row.
type summaryScanner struct {
	sum                   nodediagv1.NodeSummary
	agentVersion, agentRv string
	reportedAt            sql.NullInt64
	errs, warns           int64
}

func (sc *summaryScanner) dest() []any {
	return []any{&sc.sum.NodeName, &sc.sum.MachineId, &sc.sum.ProviderId, &sc.agentVersion, &sc.agentRv, &sc.reportedAt,
		&sc.sum.TopId, &sc.sum.TopTitle, &sc.sum.TopSeverity, &sc.errs, &sc.warns, &sc.sum.RequestId}
}

func (sc *summaryScanner) summary() *nodediagv1.NodeSummary {
	sum := &nodediagv1.NodeSummary{
		NodeName:    sc.sum.NodeName,
		MachineId:   sc.sum.MachineId,
		ProviderId:  sc.sum.ProviderId,
		TopId:       sc.sum.TopId,
		TopTitle:    sc.sum.TopTitle,
		TopSeverity: sc.sum.TopSeverity,
		Errors:      int32(sc.errs),
		Warnings:    int32(sc.warns),
		RequestId:   sc.sum.RequestId,
	}
	if sc.agentVersion != "" || sc.agentRv != "" {
		sum.Agent = &nodediagv1.AgentInfo{Version: sc.agentVersion, Revision: sc.agentRv}
	}
	if sc.reportedAt.Valid {
		sum.ReportedAt = timestamppb.New(time.Unix(0, sc.reportedAt.Int64))
	}
	return sum
}

// readable starts a read: on nil, the caller must call s.reads.Done when
// it no longer uses rdb or zdec.
func (s *SQLite) readable() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	s.reads.Add(1)
	return nil
}

// Nodes returns the summary of every node's latest report, by node name.
// It reads the summary columns only, never a report.
func (s *SQLite) Nodes(ctx context.Context) ([]*nodediagv1.NodeSummary, error) {
	if err := s.readable(); err != nil {
		return nil, fmt.Errorf("store: nodes: %w", err)
	}
	defer s.reads.Done()
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+summaryCols+`
		FROM nodes n JOIN reports r ON r.id = n.report_id ORDER BY n.node`)
	if err != nil {
		return nil, fmt.Errorf("store: %s: nodes: %w", s.path, err)
	}
	defer rows.Close()
	var out []*nodediagv1.NodeSummary
	var sc summaryScanner
	dest := sc.dest()
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, fmt.Errorf("store: %s: nodes: %w", s.path, err)
		}
		out = append(out, sc.summary())
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: %s: nodes: %w", s.path, err)
	}
	return out, nil
}

const recordCols = summaryCols + `, r.agent_start, r.seq, r.received_at, d.codec, d.data`

func (s *SQLite) scanRecord(rows *sql.Rows) (*Record, error) {
	var sc summaryScanner
	var agentStart, seq, received, codec int64
	var data []byte
	if err := rows.Scan(append(sc.dest(), &agentStart, &seq, &received, &codec, &data)...); err != nil {
		return nil, err
	}
	rec := &Record{
		Summary:    sc.summary(),
		AgentStart: fromUnixNano(agentStart),
		Seq:        uint64(seq),
		ReceivedAt: time.Unix(0, received).UTC(),
	}
	switch codec {
	case codecProto:
	case codecZstd:
		var err error
		if data, err = s.zdec.DecodeAll(data, nil); err != nil {
			return nil, fmt.Errorf("report %s seq %d: decompressing: %w", rec.Summary.GetNodeName(), seq, err)
		}
	default:
		return nil, fmt.Errorf("report %s seq %d: unknown codec %d", rec.Summary.GetNodeName(), seq, codec)
	}
	rec.Report = &nodediagv1.Report{}
	if err := proto.Unmarshal(data, rec.Report); err != nil {
		return nil, fmt.Errorf("report %s seq %d: decoding: %w", rec.Summary.GetNodeName(), seq, err)
	}
	return rec, nil
}

// Latest returns the latest report of node (see SQLite for which one that
// is), or an error wrapping ErrNotFound.
func (s *SQLite) Latest(ctx context.Context, node string) (*Record, error) {
	if err := s.readable(); err != nil {
		return nil, fmt.Errorf("store: latest %s: %w", node, err)
	}
	defer s.reads.Done()
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+recordCols+`
		FROM nodes n JOIN reports r ON r.id = n.report_id JOIN report_data d ON d.id = r.id
		WHERE n.node = ?1`, node)
	if err != nil {
		return nil, fmt.Errorf("store: %s: latest %s: %w", s.path, node, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("store: %s: latest %s: %w", s.path, node, err)
		}
		return nil, fmt.Errorf("store: node %q: %w", node, ErrNotFound)
	}
	rec, err := s.scanRecord(rows)
	if err != nil {
		return nil, fmt.Errorf("store: %s: latest %s: %w", s.path, node, err)
	}
	return rec, nil
}

// History returns up to limit reports of node (all that are kept when
// limit <= 0), in the order received, newest first; none (and no error)
// for a node the store has no report of.
func (s *SQLite) History(ctx context.Context, node string, limit int) ([]*Record, error) {
	if err := s.readable(); err != nil {
		return nil, fmt.Errorf("store: history %s: %w", node, err)
	}
	defer s.reads.Done()
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+recordCols+`
		FROM reports r JOIN report_data d ON d.id = r.id
		WHERE r.node = ?1 ORDER BY r.id DESC LIMIT ?2`, node, limit)
	if err != nil {
		return nil, fmt.Errorf("store: %s: history %s: %w", s.path, node, err)
	}
	defer rows.Close()
	var out []*Record
	for rows.Next() {
		rec, err := s.scanRecord(rows)
		if err != nil {
			return nil, fmt.Errorf("store: %s: history %s: %w", s.path, node, err)
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: %s: history %s: %w", s.path, node, err)
	}
	return out, nil
}

// Close stops accepting Puts, commits those already queued, answers them,
// waits for the reads under way, and closes the database. Puts waiting for
// room in the queue get in first.
func (s *SQLite) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.queue)
	s.mu.Unlock()
	<-s.done
	// No read starts once closed is set (readable), so Wait cannot race
	// an Add from zero.
	s.reads.Wait()
	s.zenc.Close()
	s.zdec.Close()
	return s.closeDBs()
}

func (s *SQLite) closeDBs() error {
	var errs []error
	for _, st := range []*sql.Stmt{s.insReport, s.insData, s.upsertNode, s.prune} {
		if st != nil {
			errs = append(errs, st.Close())
		}
	}
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	// The writer's connection last: closing the last connection
	// checkpoints the write-ahead log into the database.
	errs = append(errs, s.wdb.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("store: %s: close: %w", s.path, err)
	}
	return nil
}
