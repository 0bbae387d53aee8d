// Package rest serves the JobManager's REST API, modelled on Flink's: the
// same paths, JSON field names and units (milliseconds, bytes, epoch
// milliseconds), so that Flink users and their scripts feel at home. The
// API is also served under the /v1 prefix.
//
//	GET    /overview                                   cluster overview
//	GET    /config                                     dashboard configuration
//	GET    /taskmanagers                               TaskManagers
//	GET    /taskmanagers/{id}                          one TaskManager
//	GET    /jobs                                       job ids and statuses
//	GET    /jobs/overview                              jobs with times and task counts
//	GET    /jobs/{jobid}                               job details: vertices, metrics, operators, backpressure, plan
//	GET    /jobs/{jobid}/vertices/{vid}                a vertex's subtasks: status, attempt, TaskManager, host
//	GET    /jobs/{jobid}/vertices/{vid}/taskmanagers   a vertex's subtasks grouped by TaskManager
//	GET    /jobs/{jobid}/vertices/{vid}/watermarks     its subtasks' input and output watermarks
//	PATCH  /jobs/{jobid}?mode=cancel                   cancel (202)
//	GET    /jobs/{jobid}/exceptions[?maxExceptions=N]  failures, newest first
//	GET    /jobs/{jobid}/checkpoints                   counts, summary, latest, history
//	GET    /jobs/{jobid}/checkpoints/config            checkpointing configuration
//	GET    /jobs/{jobid}/checkpoints/details/{cid}     one checkpoint, per vertex
//	GET    /jobs/{jobid}/checkpoints/details/{cid}/subtasks/{vertexid}
//	POST   /jobs/{jobid}/checkpoints                   trigger a checkpoint (202 {"request-id"})
//	GET    /jobs/{jobid}/checkpoints/{triggerid}       its status
//	POST   /jobs/{jobid}/savepoints                    trigger a savepoint (202 {"request-id"})
//	GET    /jobs/{jobid}/savepoints/{triggerid}        its status (also of /stop)
//	POST   /jobs/{jobid}/stop                          stop with a savepoint (202 {"request-id"})
//
// A vertex's "metrics" are Flink's: read-records and write-records are the
// records into the chain's head and out of its tail (every operator's are
// under "operators"); read-bytes and write-bytes count the bytes of
// serialized exchanges between tasks only, which the local runtime does not
// have (its channels carry Go values): they are 0, with
// read-bytes-complete and write-bytes-complete false. On a cluster they
// are the payload bytes of the channels between subtasks on different
// TaskManagers (a channel within one TaskManager carries Go values and
// counts none, where Flink serializes it too).
//
// A vertex's watermarks (.../watermarks) are Flink's list of metrics
// [{"id": "0.currentInputWatermark", "value": "1700000000000"}, ...], one
// per subtask, with weir's "<subtask>.currentOutputWatermark" beside it;
// "-9223372036854775808" (NoWatermark, Flink's Long.MIN_VALUE) before the
// first watermark, the largest int64 at the end of input.
//
// Checkpoints, savepoints and stops are asynchronous operations, as in
// Flink: the POST answers 202 with a request id at once, and the status
// path answers {"status":{"id":"IN_PROGRESS"}} until it reports
// {"status":{"id":"COMPLETED"},"operation":{...}} with the checkpoint id,
// the savepoint location, or a "failure-cause". The server runs each
// operation on a goroutine it tracks and keeps the results of the last
// Options.MaxOperations operations.
//
// Errors are {"errors": ["..."]} with 400 (malformed body, bad id or
// parameter, no savepoint directory), 401 (token), 403 (savepoint target
// outside the allowed roots, cross-origin request, foreign Host), 404
// (unknown path, job, checkpoint, vertex or request id), 405 (method, with
// Allow), 409 (the job has ended), 413 (body too large), 415 (a state
// change without Content-Type: application/json) or 429 (too many
// operations in progress). Bad input never causes a 5xx.
//
// The server knows weir only through the small JobManager and Job
// interfaces; internal/rest/resttest has an in-memory implementation.
//
// # The dashboard
//
// The server serves the web dashboard (internal/web) itself, at "/": a
// GET or HEAD of "/" or of one of its files gets the file. Nothing needs
// mounting for it. A handler of Options.Handlers whose pattern matches the
// path wins over the dashboard (a handler at "/" replaces it).
//
// # Security
//
// The server listens on 127.0.0.1:8081 by default. With Options.Token set,
// every request to the API and to Options.Handlers (/metrics included)
// needs "Authorization: Bearer <token>", or gets 401; Validate refuses an
// address reachable from other machines without a token. The dashboard's
// own files are the exception: they are served without the token (a
// browser cannot attach one to the navigation that loads the page, and the
// files hold no data); the page asks for the token and sends it with every
// API request it makes.
//
// Savepoint targets of requests are resolved by
// storage.ResolveSavepointTarget against the job's savepoint directory and
// Options.SavepointAllowedRoots: elsewhere, or with S3 parameters
// (endpoint=…) or credentials of the request, 403. State-changing routes
// need Content-Type: application/json (415); state-changing requests from
// pages of other origins (Origin, Sec-Fetch-Site) get 403 unless listed in
// Options.TrustedOrigins; on a loopback address the Host header must name
// a loopback address or localhost at the listening port (403, against DNS
// rebinding); answers forbid framing (guard.go). Options.TLSCertFile and
// TLSKeyFile serve HTTPS. docs/rest-security.md says what a caller can do
// and what to put in front of the server off loopback.
//
// # Usage
//
//	srv, err := rest.New(jm, rest.Options{Token: token, Handlers: map[string]http.Handler{
//		"GET /metrics": promhttp.Handler(), // the dashboard is served at "/" already
//	}})
//	if err != nil { ... }
//	defer srv.Close()
//	err = srv.Serve(ctx) // until ctx is done or Close
package rest
