// Package web is weir's web dashboard: a single-page application of plain
// JavaScript, SVG and CSS, embedded in the binary with go:embed, that reads
// and drives the REST API of internal/rest. It has no front-end framework,
// no build step and loads nothing from elsewhere at run time.
//
// Pages (hash routes, so that the server only ever serves "/"):
//
//	#/                              jobs overview and cluster figures
//	#/jobs/{id}                     the job graph: vertices left to right in
//	                                topological order, records/s in and out,
//	                                backpressure colouring; every chained
//	                                operator's records in and out
//	#/jobs/{id}/checkpoints         counts, summary, duration and size charts,
//	                                history table, configuration
//	#/jobs/{id}/checkpoints/{cid}   one checkpoint: a per-subtask timeline of
//	                                start delay, alignment, sync and async phases
//	#/jobs/{id}/exceptions          failures, newest first
//
// A job page has buttons to trigger a checkpoint (polling its trigger id),
// take a savepoint (into a directory given in a field) and cancel the job
// (after a confirmation). Pages refresh by polling, at the interval chosen
// in the top bar (off, 1 s, 3 s or 10 s, kept in localStorage under
// "weir.refresh"), or else the one GET /config reports (3 s by default).
// When the API requires a bearer token, the user enters it in the token
// field; it is kept in sessionStorage and sent as the Authorization header
// of every API request.
//
// The dashboard uses relative URLs only, so it also works behind a reverse
// proxy that mounts the API under a path prefix.
//
// # Usage
//
// internal/rest mounts Handler at "/" itself. To serve the files elsewhere:
//
//	mux.Handle("/", web.Handler())
package web
