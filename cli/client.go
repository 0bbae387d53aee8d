package cli

// Client commands: they talk to a running JobManager over its REST API
// (internal/rest), as Flink's CLI does.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/weirstream/weir/internal/rest"
)

const defaultJobManager = "http://127.0.0.1:8081"

// pollInterval is how often waiting commands ask for an operation's status.
var pollInterval = 100 * time.Millisecond

type clientFlags struct {
	jobmanager string
	token      string
	caFile     string
	timeout    time.Duration
}

func newClientCommands() []*cobra.Command {
	return []*cobra.Command{
		clientCommand(&cobra.Command{Use: "list", Short: "List the jobs of a running JobManager", Args: cobra.NoArgs}, false, runList),
		clientCommand(&cobra.Command{Use: "info JOB", Short: "Show a job's status, vertices and checkpoint counts", Args: jobArg}, false, runInfo),
		clientCommand(&cobra.Command{Use: "cancel JOB", Short: "Cancel a job", Args: jobArg}, false, runCancel),
		clientCommand(&cobra.Command{Use: "checkpoint JOB", Short: "Take a checkpoint of a job now and wait for it",
			Long: "Triggers a checkpoint, waits until it completed and prints its id, duration and size.",
			Args: jobArg}, true, runCheckpoint),
		clientCommand(&cobra.Command{Use: "savepoint JOB", Short: "Take a savepoint of a job and wait for it",
			Long: "Takes a savepoint into --dir (default: the job's savepoint directory), waits until it completed and prints its path.",
			Args: jobArg}, true, runSavepoint),
		clientCommand(&cobra.Command{Use: "stop JOB", Short: "Stop a job with a savepoint",
			Long: "Takes a savepoint into --dir (default: the job's savepoint directory), lets sinks commit, stops the job and prints the savepoint's path.",
			Args: jobArg}, true, runStop),
		clientCommand(&cobra.Command{Use: "checkpoints JOB", Short: "Show a job's checkpoint counts and recent history", Args: jobArg}, false, runCheckpoints),
	}
}

// clientRun is a client command's body.
type clientRun func(ctx context.Context, cx *clientCtx, args []string) error

// clientCtx is what a client command works with.
type clientCtx struct {
	cmd    *cobra.Command
	api    *restClient
	flags  *clientFlags
	stdout io.Writer
	stderr io.Writer
	// dir and drain are the savepoint/stop flags.
	dir   string
	drain bool
}

func clientCommand(c *cobra.Command, waits bool, run clientRun) *cobra.Command {
	f := &clientFlags{}
	cx := &clientCtx{cmd: c, flags: f}
	c.Flags().StringVar(&f.jobmanager, "jobmanager", defaultJobManager, "URL of the JobManager's REST API (or set WEIR_JOBMANAGER)")
	c.Flags().StringVar(&f.token, "token", "", "bearer token of the REST API (or set "+tokenEnv+")")
	c.Flags().StringVar(&f.caFile, "ca-file", "", "PEM file of the CA certificates to trust for an https:// --jobmanager (or set WEIR_CA_FILE; default: the system's roots)")
	if waits {
		c.Flags().DurationVar(&f.timeout, "timeout", 0, "give up waiting after this long (e.g. 5m); 0 waits until the operation ends")
	}
	switch c.Name() {
	case "savepoint", "stop":
		c.Flags().StringVar(&cx.dir, "dir", "", "directory or storage URL for the savepoint, under the job's savepoint directory (a relative one is) or a root the job's --savepoint-allowed-roots allow (default: the job's savepoint directory)")
	}
	if c.Name() == "stop" {
		c.Flags().BoolVar(&cx.drain, "drain", false, "emit the maximum watermark first, so that every event-time window and timer fires")
	}
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if !cmd.Flags().Changed("jobmanager") {
			if env := os.Getenv("WEIR_JOBMANAGER"); env != "" {
				f.jobmanager = env
			}
		}
		if f.token == "" {
			f.token = envToken(cmd.ErrOrStderr())
		}
		if f.caFile == "" {
			f.caFile = os.Getenv("WEIR_CA_FILE")
		}
		if f.timeout < 0 {
			return fmt.Errorf("--timeout is %v: use 0 (wait until done) or a positive duration such as 5m", f.timeout)
		}
		api, err := newRestClient(f.jobmanager, f.token, f.caFile)
		if err != nil {
			return err
		}
		defer api.close()
		cx.api, cx.stdout, cx.stderr = api, cmd.OutOrStdout(), cmd.ErrOrStderr()
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
		defer stop()
		return run(ctx, cx, args)
	}
	return c
}

// tokenEnv is the variable holding the REST API's token, read by the
// server (weir run) and the clients alike.
const tokenEnv = "WEIR_REST_TOKEN"

// oldTokenEnv is the clients' former variable, still read.
const oldTokenEnv = "WEIR_TOKEN"

// envToken returns the token of the environment: tokenEnv, or else the
// deprecated oldTokenEnv with a note on w.
func envToken(w io.Writer) string {
	if t := os.Getenv(tokenEnv); t != "" {
		return t
	}
	if t := os.Getenv(oldTokenEnv); t != "" {
		fmt.Fprintf(w, "weir: %s is deprecated: set %s instead (weir run and the client commands both read it)\n", oldTokenEnv, tokenEnv)
		return t
	}
	return ""
}

// --- HTTP --------------------------------------------------------------------

// restClient calls the REST API.
type restClient struct {
	base  *url.URL
	token string
	http  *http.Client
}

func newRestClient(raw, token, caFile string) (*restClient, error) {
	s := raw
	if !strings.Contains(s, "://") {
		s = "http://" + s // host:port
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("--jobmanager %q is not the URL of a JobManager, such as %s", raw, defaultJobManager)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if caFile != "" {
		if u.Scheme != "https" {
			return nil, fmt.Errorf("--ca-file %s applies to an https:// --jobmanager, not to %s", caFile, u.Redacted())
		}
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", caFile)
		}
		transport.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &restClient{base: u, token: token, http: &http.Client{Timeout: 30 * time.Second, Transport: transport}}, nil
}

// close releases the connections kept for reuse.
func (c *restClient) close() { c.http.CloseIdleConnections() }

// apiError is an error answer of the REST API.
type apiError struct {
	code int
	msg  string
}

func (e *apiError) Error() string { return e.msg }

// call sends in (if not nil) as JSON to path and decodes the answer into out
// (if not nil). Path segments must be escaped by the caller (jobPath).
func (c *restClient) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	u := *c.base
	p, q, _ := strings.Cut(path, "?")
	u.RawPath = c.base.EscapedPath() + p
	u.Path, _ = url.PathUnescape(u.RawPath)
	u.RawQuery = q
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	if in != nil || method != http.MethodGet {
		// The server refuses a state-changing request without it (a
		// cross-site form cannot send it).
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("cannot reach the JobManager at %s: %v (is it running? see --jobmanager)", c.base.Redacted(), netCause(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("reading the JobManager's answer: %w", err)
	}
	if resp.StatusCode >= 400 {
		var e rest.ErrorResponse
		msg := ""
		if json.Unmarshal(data, &e) == nil && len(e.Errors) > 0 {
			msg = strings.Join(e.Errors, "; ")
		} else {
			msg = fmt.Sprintf("the JobManager answered %s to %s %s", resp.Status, method, u.Path)
		}
		if resp.StatusCode == http.StatusUnauthorized {
			msg += " (pass --token or set " + tokenEnv + ")"
		}
		return &apiError{code: resp.StatusCode, msg: oneLine(msg)}
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("the JobManager at %s answered %s %s with something else than the expected JSON: %v", c.base.Redacted(), method, u.Path, err)
	}
	return nil
}

// netCause strips the URL that net/http puts in front of a network error.
func netCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return oe.Err
	}
	return err
}

// jobPath is /jobs/<job><rest> with the job id escaped.
func jobPath(job, rest string) string { return "/jobs/" + url.PathEscape(job) + rest }

// oneLine keeps the first line of a message (errors print on one line).
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if first, _, ok := strings.Cut(s, "\n"); ok {
		return strings.TrimSpace(first) + " (…)"
	}
	return s
}

// --- waiting -----------------------------------------------------------------

// progress shows on stderr how long a command has been waiting: updated in
// place on a terminal, otherwise as a plain line now and then.
type progress struct {
	w     io.Writer
	tty   bool
	label string
	start time.Time
	// next is when a plain line is due.
	next time.Time
	now  func() time.Time
}

// plainEvery is the interval between plain progress lines.
const plainEvery = 10 * time.Second

func newProgress(w io.Writer, label string) *progress {
	p := &progress{w: w, tty: isTerminal(w), label: label, now: time.Now}
	p.start = p.now()
	p.next = p.start
	return p
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || os.Getenv("TERM") == "dumb" {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// update shows the elapsed time.
func (p *progress) update() {
	now := p.now()
	elapsed := now.Sub(p.start)
	switch {
	case p.tty:
		fmt.Fprintf(p.w, "\r\033[K%s… %s", p.label, formatElapsed(elapsed))
	case !now.Before(p.next):
		if elapsed < time.Second {
			fmt.Fprintf(p.w, "%s…\n", p.label)
		} else {
			fmt.Fprintf(p.w, "%s… %s\n", p.label, formatElapsed(elapsed))
		}
		p.next = now.Add(plainEvery)
	}
}

// done clears the line on a terminal.
func (p *progress) done() {
	if p.tty {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

func formatElapsed(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Truncate(time.Second).String()
}

// waitOperation polls an asynchronous operation's status until it
// completed, showing progress; it returns the operation's outcome, or the
// failure as an error.
func waitOperation(ctx context.Context, cx *clientCtx, statusPath, what, job string) (*rest.OperationInfo, error) {
	if cx.flags.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cx.flags.timeout)
		defer cancel()
	}
	p := newProgress(cx.stderr, fmt.Sprintf("Waiting for the %s of job %s", what, job))
	defer p.done()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		p.update()
		var res rest.AsynchronousOperationResult
		err := cx.api.call(ctx, "GET", statusPath, nil, &res)
		switch {
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			return nil, giveUp(ctx, what, job)
		case err != nil:
			return nil, err
		case res.Status.ID == rest.StatusCompleted && res.Operation == nil:
			return nil, fmt.Errorf("the JobManager reported the %s of job %s completed without an outcome", what, job)
		case res.Status.ID == rest.StatusCompleted && res.Operation.FailureCause != nil:
			cause := oneLine(res.Operation.FailureCause.StackTrace)
			if strings.Contains(cause, "no savepoint directory") {
				return nil, noSavepointDir(cx, job)
			}
			return nil, fmt.Errorf("the %s of job %s failed: %s", what, job, cause)
		case res.Status.ID == rest.StatusCompleted:
			return res.Operation, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, giveUp(ctx, what, job)
		}
	}
}

func giveUp(ctx context.Context, what, job string) error {
	why := "interrupted"
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		why = "gave up waiting (--timeout)"
	}
	return fmt.Errorf("%s: the %s of job %s may still complete; see weir checkpoints %s", why, what, job, job)
}

// --- commands ----------------------------------------------------------------

func runList(ctx context.Context, cx *clientCtx, _ []string) error {
	var out rest.MultipleJobsDetails
	if err := cx.api.call(ctx, "GET", "/jobs/overview", nil, &out); err != nil {
		return err
	}
	if len(out.Jobs) == 0 {
		fmt.Fprintln(cx.stdout, "No jobs.")
		return nil
	}
	tw := tabwriter.NewWriter(cx.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB ID\tNAME\tSTATE\tSTARTED\tDURATION\tTASKS")
	for _, j := range out.Jobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d/%d running\n", j.JID, j.Name, j.State,
			formatTime(j.StartTime), formatMillis(j.Duration), j.Tasks.Running, j.Tasks.Total)
	}
	return tw.Flush()
}

func runInfo(ctx context.Context, cx *clientCtx, args []string) error {
	var d rest.JobDetailsInfo
	if err := cx.api.call(ctx, "GET", jobPath(args[0], ""), nil, &d); err != nil {
		return err
	}
	w := cx.stdout
	fmt.Fprintf(w, "Job:          %s (%s)\n", d.JID, d.Name)
	fmt.Fprintf(w, "State:        %s\n", d.State)
	fmt.Fprintf(w, "Started:      %s\n", formatTime(d.StartTime))
	if d.EndTime >= 0 {
		fmt.Fprintf(w, "Ended:        %s\n", formatTime(d.EndTime))
	}
	fmt.Fprintf(w, "Duration:     %s\n", formatMillis(d.Duration))
	c := d.Checkpoints
	fmt.Fprintf(w, "Checkpoints:  %d completed, %d failed, %d in progress", c.Completed, c.Failed, c.InProgress)
	if c.LatestCompleted > 0 {
		fmt.Fprintf(w, "; latest completed: %d", c.LatestCompleted)
	}
	fmt.Fprintln(w)
	if len(d.Vertices) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VERTEX\tNAME\tPARALLELISM\tSTATUS\tRECORDS IN\tRECORDS OUT\tBYTES IN\tBYTES OUT\tBACKPRESSURE")
	uncounted := false
	for _, v := range d.Vertices {
		m := v.Metrics
		in, out := countedBytes(m.ReadBytes, m.ReadBytesComplete), countedBytes(m.WriteBytes, m.WriteBytesComplete)
		uncounted = uncounted || !m.ReadBytesComplete || !m.WriteBytesComplete
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%s\t%s\t%s (%.0f%%)\n", v.ID, v.Name, v.Parallelism, v.Status,
			m.ReadRecords, m.WriteRecords, in, out, v.BackPressure.Level, 100*v.BackPressure.Ratio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if uncounted {
		fmt.Fprintln(w, "\nBytes (-) are not counted: they measure records serialized between processes, and the tasks of this job pass them in memory.")
	}
	return nil
}

func runCancel(ctx context.Context, cx *clientCtx, args []string) error {
	job := args[0]
	if err := cx.api.call(ctx, "PATCH", jobPath(job, "?mode=cancel"), nil, nil); err != nil {
		return err
	}
	fmt.Fprintf(cx.stdout, "Cancelling job %s.\n", job)
	return nil
}

func runCheckpoint(ctx context.Context, cx *clientCtx, args []string) error {
	job := args[0]
	var trig rest.TriggerResponse
	if err := cx.api.call(ctx, "POST", jobPath(job, "/checkpoints"), rest.CheckpointTriggerRequest{}, &trig); err != nil {
		return err
	}
	op, err := waitOperation(ctx, cx, jobPath(job, "/checkpoints/"+trig.RequestID), "checkpoint", job)
	if err != nil {
		return err
	}
	if op.CheckpointID == nil {
		return fmt.Errorf("the JobManager reported the checkpoint of job %s completed without its id", job)
	}
	id := *op.CheckpointID
	var st rest.CheckpointStatistics
	if err := cx.api.call(ctx, "GET", jobPath(job, fmt.Sprintf("/checkpoints/details/%d", id)), nil, &st); err != nil {
		// Completed, but its statistics already left the history.
		fmt.Fprintf(cx.stdout, "Checkpoint %d of job %s completed.\n", id, job)
		return nil
	}
	fmt.Fprintf(cx.stdout, "Checkpoint %d of job %s completed in %s, %s uploaded of %s of state%s\n", id, job,
		formatMillis(st.EndToEndDuration), formatBytes(st.CheckpointedSize), formatBytes(st.StateSize), pathSuffix(st.ExternalPath))
	return nil
}

func pathSuffix(p *string) string {
	if p == nil || *p == "" {
		return ""
	}
	return ": " + *p
}

// needSavepointDir fails early, with what to do, when neither --dir nor
// the job's default savepoint directory says where a savepoint goes.
func needSavepointDir(ctx context.Context, cx *clientCtx, job string) error {
	if cx.dir != "" {
		return nil
	}
	var cfg rest.CheckpointConfig
	if err := cx.api.call(ctx, "GET", jobPath(job, "/checkpoints/config"), nil, &cfg); err != nil {
		return err
	}
	if cfg.SavepointDir == "" {
		return noSavepointDir(cx, job)
	}
	return nil
}

func noSavepointDir(cx *clientCtx, job string) error {
	return fmt.Errorf("job %s has no savepoint directory: pass one with %s --dir DIR, or start weir run with --savepoint-dir DIR", job, cx.cmd.CommandPath())
}

func runSavepoint(ctx context.Context, cx *clientCtx, args []string) error {
	job := args[0]
	if err := needSavepointDir(ctx, cx, job); err != nil {
		return err
	}
	var trig rest.TriggerResponse
	req := rest.SavepointTriggerRequest{TargetDirectory: cx.dir}
	if err := cx.api.call(ctx, "POST", jobPath(job, "/savepoints"), req, &trig); err != nil {
		return err
	}
	op, err := waitOperation(ctx, cx, jobPath(job, "/savepoints/"+trig.RequestID), "savepoint", job)
	if err != nil {
		return err
	}
	loc := location(op)
	fmt.Fprintf(cx.stdout, "Savepoint%s of job %s completed: %s\n", savepointFigures(ctx, cx, job, loc), job, loc)
	return nil
}

func runStop(ctx context.Context, cx *clientCtx, args []string) error {
	job := args[0]
	if err := needSavepointDir(ctx, cx, job); err != nil {
		return err
	}
	var trig rest.TriggerResponse
	req := rest.StopWithSavepointRequest{TargetDirectory: cx.dir, Drain: cx.drain}
	if err := cx.api.call(ctx, "POST", jobPath(job, "/stop"), req, &trig); err != nil {
		return err
	}
	op, err := waitOperation(ctx, cx, jobPath(job, "/savepoints/"+trig.RequestID), "stop-with-savepoint", job)
	if err != nil {
		return err
	}
	fmt.Fprintf(cx.stdout, "Job %s stopped with savepoint %s\n", job, location(op))

	return nil
}

func location(op *rest.OperationInfo) string {
	if op.Location == nil {
		return "(no path reported)"
	}
	return *op.Location
}

// savepointFigures finds the savepoint at loc in the job's history and
// returns " <id> (<duration>, <size>)", or "" if it is not there.
func savepointFigures(ctx context.Context, cx *clientCtx, job, loc string) string {
	var stats rest.CheckpointingStatistics
	if cx.api.call(ctx, "GET", jobPath(job, "/checkpoints"), nil, &stats) != nil {
		return ""
	}
	for _, c := range stats.History {
		if c.IsSavepoint && c.ExternalPath != nil && *c.ExternalPath == loc {
			return fmt.Sprintf(" %d (%s, %s)", c.ID, formatMillis(c.EndToEndDuration), formatBytes(c.CheckpointedSize))
		}
	}
	return ""
}

func runCheckpoints(ctx context.Context, cx *clientCtx, args []string) error {
	job := args[0]
	var s rest.CheckpointingStatistics
	if err := cx.api.call(ctx, "GET", jobPath(job, "/checkpoints"), nil, &s); err != nil {
		return err
	}
	w := cx.stdout
	c := s.Counts
	fmt.Fprintf(w, "Checkpoints of job %s: %d triggered, %d completed, %d failed, %d in progress, %d restored\n",
		job, c.Total, c.Completed, c.Failed, c.InProgress, c.Restored)
	if r := s.Latest.Restored; r != nil {
		kind := "checkpoint"
		if r.IsSavepoint {
			kind = "savepoint"
		}
		fmt.Fprintf(w, "Latest restore: %s %d from %s at %s\n", kind, r.ID, r.ExternalPath, formatTime(r.RestoreTimestamp))
	}
	if len(s.History) == 0 {
		fmt.Fprintln(w, "No checkpoints yet.")
		return nil
	}
	if note := idGapNote(s); note != "" {
		fmt.Fprintln(w, note)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// CHECKPOINTED is what the checkpoint uploaded, FULL SIZE the state it
	// refers to (Flink's "Checkpointed Data Size" and "Full Checkpoint
	// Data Size"): less than it for incremental checkpoints.
	fmt.Fprintln(tw, "ID\tTYPE\tSTATUS\tTRIGGERED\tDURATION\tCHECKPOINTED\tFULL SIZE\tACKS\tPATH OR FAILURE")
	for _, h := range s.History {
		kind := "checkpoint"
		if h.IsSavepoint {
			kind = "savepoint"
		}
		detail := ""
		switch {
		case h.FailureMessage != nil:
			detail = oneLine(*h.FailureMessage)
		case h.ExternalPath != nil:
			detail = *h.ExternalPath
			if h.Discarded != nil && *h.Discarded {
				detail += " (discarded)"
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d\t%s\n", h.ID, kind, h.Status, formatTime(h.TriggerTimestamp),
			formatMillis(h.EndToEndDuration), formatBytes(h.CheckpointedSize), formatBytes(h.StateSize), h.NumAcknowledgedSubtasks, h.NumSubtasks, detail)
	}
	return tw.Flush()
}

// idGapNote explains why this run's first checkpoint id is not the one
// after the restored checkpoint's (or 1): ids are reserved in blocks of 100
// in the checkpoint storage, so that no id repeats after a crash.
func idGapNote(s rest.CheckpointingStatistics) string {
	var last int64
	for _, h := range s.History {
		last = max(last, h.ID)
	}
	// The ids of one run are consecutive; the history may hold only the
	// newest of them.
	first := last - s.Counts.Total + 1
	var after int64
	if r := s.Latest.Restored; r != nil {
		after = r.ID
	}
	if s.Counts.Total <= 0 || first <= after+1 {
		return ""
	}
	return fmt.Sprintf("Checkpoint ids of this run start at %d, not %d: each run reserves ids in blocks of 100 in the checkpoint storage, so that no id repeats after a crash; the ids between were never used.", first, after+1)
}

// --- formatting --------------------------------------------------------------

func formatTime(ms int64) string {
	if ms < 0 {
		return "-"
	}
	return time.UnixMilli(ms).Local().Format("2006-01-02 15:04:05")
}

func formatMillis(ms int64) string {
	if ms < 0 {
		return "-"
	}
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return d.String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		return d.Round(time.Second).String()
	}
}

// countedBytes formats a byte counter, "-" when it is not counted.
func countedBytes(n int64, complete bool) string {
	if !complete {
		return "-"
	}
	return formatBytes(n)
}

func formatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 5; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
