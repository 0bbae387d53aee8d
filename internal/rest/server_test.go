package rest_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/internal/rest"
)

// T formats an expectation: %[1]d is t0 in epoch milliseconds.
func T(format string, args ...any) string {
	return fmt.Sprintf(format, append([]any{t0.UnixMilli()}, args...)...)
}

func TestReadEndpoints(t *testing.T) {
	jm, _, _ := fixture()
	s := startServer(t, jm, rest.Options{})
	now := msAt(2 * time.Minute)
	tests := []struct {
		name, path string
		want       string // a JSON subset of the 200 answer
	}{
		{"overview", "/overview",
			`{"taskmanagers":1,"slots-total":4,"slots-available":2,"jobs-running":1,"jobs-finished":1,"jobs-cancelled":0,"jobs-failed":0}`},
		{"config", "/config",
			`{"refresh-interval":3000,"timezone-name":"UTC","timezone-offset":0,"features":{"web-submit":false,"web-cancel":true}}`},
		{"taskmanagers", "/taskmanagers",
			`{"taskmanagers":[{"id":"local","path":"local","jmxPort":-1,"slotsNumber":4,"freeSlots":2,"hardware":{"cpuCores":4,"physicalMemory":8589934592}}]}`},
		{"taskmanager", "/taskmanagers/local",
			`{"id":"local","path":"local","jmxPort":-1,"slotsNumber":4,"freeSlots":2}`},
		{"jobs", "/jobs",
			`{"jobs":[{"id":"wordcount","status":"RUNNING"},{"id":"etl","status":"FINISHED"}]}`},
		{"versioned", "/v1/jobs",
			`{"jobs":[{"id":"wordcount","status":"RUNNING"},{"id":"etl","status":"FINISHED"}]}`},
		{"jobs overview", "/jobs/overview", T(`{"jobs":[
			{"jid":"wordcount","name":"WordCount","state":"RUNNING","start-time":%[1]d,"end-time":-1,"duration":120000,
			 "tasks":{"total":4,"running":4,"finished":0}},
			{"jid":"etl","name":"ETL","state":"FINISHED","start-time":%[1]d,"end-time":%[2]d,"duration":120000,"last-modification":%[2]d,
			 "tasks":{"total":4,"running":0,"finished":4}}]}`, now)},
		{"job", "/jobs/wordcount", T(`{"jid":"wordcount","name":"WordCount","isStoppable":true,"state":"RUNNING",
			"start-time":%[1]d,"end-time":-1,"duration":120000,"maxParallelism":128,"now":%[2]d,
			"timestamps":{"RUNNING":%[1]d,"FINISHED":"$absent"},
			"status-counts":{"RUNNING":2,"FAILED":0},
			"vertices":[
			 {"id":"1","name":"Source: lines -> split","parallelism":2,"maxParallelism":128,"status":"RUNNING",
			  "start-time":%[1]d,"end-time":-1,"duration":120000,"tasks":{"RUNNING":2,"CREATED":0},
			  "metrics":{"read-records":0,"write-records":1000,"write-bytes":64000,"write-records-complete":true,"accumulated-busy-time":30000},
			  "backpressure":{"backpressure-level":"low","ratio":0.3}},
			 {"id":"2","name":"count -> Sink: out","parallelism":2,
			  "metrics":{"read-records":1000,"read-bytes":64000,"accumulated-idle-time":20000},
			  "backpressure":{"backpressure-level":"ok","ratio":0}}],
			"plan":{"jid":"wordcount","name":"WordCount","type":"STREAMING","nodes":[
			 {"id":"1","parallelism":2,"description":"Source: lines -> split","inputs":"$absent"},
			 {"id":"2","inputs":[{"num":0,"id":"1","ship_strategy":"HASH","exchange":"pipelined_bounded"}]}]},
			"checkpoints":{"completed":2,"failed":1,"in_progress":1,"latest_completed":1}}`, now)},
		{"ended job", "/jobs/etl", T(`{"state":"FINISHED","isStoppable":false,"end-time":%[2]d,
			"timestamps":{"RUNNING":%[1]d,"FINISHED":%[2]d},"status-counts":{"FINISHED":2,"RUNNING":0},
			"vertices":[{"status":"FINISHED","end-time":%[2]d,"tasks":{"FINISHED":2}},{"status":"FINISHED"}]}`, now)},
		{"exceptions", "/jobs/etl/exceptions", T(`{"root-exception":"sink commit failed: disk full","timestamp":%[2]d,"truncated":false,
			"all-exceptions":[{"exception":"sink commit failed: disk full","task":""},{"exception":"boom","task":"count -> Sink: out (1/2)"}],
			"exceptionHistory":{"truncated":false,"entries":[
			 {"exceptionName":"*fmt.wrapError","stacktrace":"sink commit failed: disk full","timestamp":%[2]d,"taskName":null,"location":null,"concurrentExceptions":[]},
			 {"exceptionName":"*errors.errorString","stacktrace":"boom","timestamp":%[3]d,"taskName":"count -> Sink: out (1/2)"}]}}`,
			msAt(50*time.Second), msAt(5*time.Second))},
		{"exceptions truncated", "/jobs/etl/exceptions?maxExceptions=1",
			`{"root-exception":"sink commit failed: disk full","truncated":true,"exceptionHistory":{"truncated":true,"entries":[{"stacktrace":"sink commit failed: disk full"}]}}`},
		{"no exceptions", "/jobs/wordcount/exceptions",
			`{"root-exception":null,"timestamp":null,"all-exceptions":[],"exceptionHistory":{"entries":[],"truncated":false}}`},
		{"checkpoints", "/jobs/wordcount/checkpoints", T(`{
			"counts":{"restored":0,"total":4,"in_progress":1,"completed":2,"failed":1},
			"summary":{
			 "state_size":{"min":3072,"max":4000,"avg":3536,"p50":3536},
			 "checkpointed_size":{"min":768,"max":4000,"avg":2384},
			 "end_to_end_duration":{"min":500,"max":1000,"avg":750,"p50":750,"p99":995},
			 "processed_data":{"min":0,"max":0},"persisted_data":{"max":0},"alignment_buffered":{"max":0}},
			"latest":{
			 "completed":{"className":"completed","id":1,"status":"COMPLETED","is_savepoint":false,"checkpoint_type":"CHECKPOINT",
			  "trigger_timestamp":%[2]d,"latest_ack_timestamp":%[3]d,"state_size":3072,"checkpointed_size":768,
			  "end_to_end_duration":500,"num_subtasks":4,"num_acknowledged_subtasks":4,
			  "external_path":"file:///ckpt/wordcount/chk-1","discarded":false,"tasks":{},"failure_message":"$absent"},
			 "savepoint":{"id":3,"is_savepoint":true,"checkpoint_type":"SAVEPOINT","external_path":"file:///sp/savepoint-abc123",
			  "latest_ack_timestamp":-1,"num_acknowledged_subtasks":0,"end_to_end_duration":1000},
			 "failed":{"className":"failed","id":2,"status":"FAILED","failure_timestamp":%[4]d,
			  "failure_message":"checkpoint expired before completing","end_to_end_duration":60000,"external_path":"$absent"},
			 "restored":null},
			"history":[
			 {"id":4,"className":"in_progress","status":"IN_PROGRESS","end_to_end_duration":300,"latest_ack_timestamp":%[5]d,
			  "num_subtasks":4,"num_acknowledged_subtasks":1,"external_path":"$absent","failure_message":"$absent","discarded":"$absent"},
			 {"id":3},{"id":2},{"id":1}]}`,
			msAt(10*time.Second), msAt(10500*time.Millisecond), msAt(80*time.Second), msAt(40300*time.Millisecond))},
		{"checkpoints restored", "/jobs/etl/checkpoints", T(`{
			"counts":{"restored":1,"total":0,"in_progress":0,"completed":0,"failed":0},
			"latest":{"completed":null,"savepoint":null,"failed":null,
			 "restored":{"id":7,"restore_timestamp":%[1]d,"is_savepoint":true,"external_path":"file:///sp/savepoint-777777"}},
			"history":[]}`)},
		{"checkpoint config", "/jobs/wordcount/checkpoints/config",
			`{"mode":"exactly_once","interval":10000,"timeout":600000,"min_pause":0,"max_concurrent":1,
			 "externalization":{"enabled":true,"delete_on_cancellation":true},"state_backend":"heap",
			 "checkpoint_storage":"file:///tmp/ckpt","unaligned_checkpoints":false,"tolerable_failed_checkpoints":0,
			 "aligned_checkpoint_timeout":0,"retained_checkpoints":1,"savepoint_dir":"file:///tmp/savepoints","every_n_records":0}`},
		{"checkpoint details", "/jobs/wordcount/checkpoints/details/1", T(`{"id":1,"className":"completed","status":"COMPLETED",
			"tasks":{
			 "1":{"id":1,"status":"COMPLETED","latest_ack_timestamp":%[2]d,"state_size":2000,"checkpointed_size":500,
			  "end_to_end_duration":200,"num_subtasks":2,"num_acknowledged_subtasks":2,"processed_data":0},
			 "2":{"state_size":1072,"checkpointed_size":268,"latest_ack_timestamp":%[3]d,"end_to_end_duration":500,"num_subtasks":2,"num_acknowledged_subtasks":2}}}`,
			msAt(10200*time.Millisecond), msAt(10500*time.Millisecond))},
		{"failed checkpoint details", "/jobs/wordcount/checkpoints/details/2",
			`{"id":2,"className":"failed","failure_message":"checkpoint expired before completing",
			 "tasks":{"1":{"status":"FAILED","num_acknowledged_subtasks":1,"state_size":1000},"2":{"num_acknowledged_subtasks":0,"latest_ack_timestamp":-1,"end_to_end_duration":-1}}}`},
		{"subtasks", "/jobs/wordcount/checkpoints/details/1/subtasks/2", T(`{"id":1,"status":"COMPLETED","state_size":1072,
			"num_subtasks":2,"num_acknowledged_subtasks":2,
			"summary":{"state_size":{"min":500,"max":572,"avg":536},"checkpointed_size":{"min":125,"max":143},
			 "end_to_end_duration":{"min":400,"max":500,"avg":450},
			 "checkpoint_duration":{"sync":{"min":5,"max":5},"async":{"min":20,"max":20}},
			 "alignment":{"duration":{"min":10,"max":30,"avg":20},"buffered":{"max":0},"processed":{"max":0},"persisted":{"max":0}},
			 "start_delay":{"min":1,"max":1}},
			"subtasks":[
			 {"index":0,"status":"completed","ack_timestamp":%[2]d,"end_to_end_duration":500,"state_size":500,"checkpointed_size":125,
			  "checkpoint":{"sync":5,"async":20},"alignment":{"duration":30,"buffered":0,"processed":0,"persisted":0},
			  "start_delay":1,"unaligned_checkpoint":false,"aborted":false},
			 {"index":1,"status":"completed","state_size":572,"alignment":{"duration":10}}]}`, msAt(10500*time.Millisecond))},
		{"subtasks pending", "/jobs/wordcount/checkpoints/details/4/subtasks/2",
			`{"id":4,"status":"IN_PROGRESS","num_subtasks":2,"num_acknowledged_subtasks":0,"latest_ack_timestamp":-1,
			 "summary":{"state_size":{"max":0}},
			 "subtasks":[{"index":0,"status":"pending_or_failed","ack_timestamp":"$absent"},{"index":1,"status":"pending_or_failed"}]}`},
		{"subtasks partly acknowledged", "/jobs/wordcount/checkpoints/details/4/subtasks/1",
			`{"num_subtasks":2,"num_acknowledged_subtasks":1,"subtasks":[{"index":0,"status":"completed","state_size":10},{"index":1,"status":"pending_or_failed"}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.do(t, "GET", tt.path, "")
			if r.code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", tt.path, r.code, r.body)
			}
			if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
				t.Errorf("Content-Type %q", ct)
			}
			checkJSON(t, r.body, tt.want)
		})
	}
}

func TestCheckpointHistoryIsBounded(t *testing.T) {
	jm, _, _ := fixture()
	s := startServer(t, jm, rest.Options{CheckpointHistory: 2})
	r := s.do(t, "GET", "/jobs/wordcount/checkpoints", "")
	// The latest completed checkpoint is reported although it left the
	// listed history; the summary still covers it.
	checkJSON(t, r.body, `{"history":[{"id":4},{"id":3}],"latest":{"completed":{"id":1}},"summary":{"state_size":{"min":3072}}}`)
}

// TestBadRequests covers every endpoint with bad input: each answers with
// the right 4xx status and a JSON error naming the problem.
func TestBadRequests(t *testing.T) {
	jm, _, _ := fixture()
	s := startServer(t, jm, rest.Options{MaxBodyBytes: 1024})
	hex := strings.Repeat("ab", 16)
	tests := []struct {
		name, method, path, body string
		code                     int
		msg                      string // a substring of the error
		allow                    string // the Allow header, for 405
	}{
		{"unknown path", "GET", "/nope", "", 404, "no such path: /nope", ""},
		{"unknown versioned path", "GET", "/v1/nope", "", 404, "no such path", ""},
		{"unknown job subpath", "GET", "/jobs/wordcount/nope", "", 404, "no such path", ""},
		{"root, not GET", "POST", "/", "", 404, "no such path: /", ""}, // GET serves the dashboard
		{"unknown job", "GET", "/jobs/nope", "", 404, `job "nope" not found`, ""},
		{"unknown taskmanager", "GET", "/taskmanagers/nope", "", 404, `taskmanager "nope" not found`, ""},
		{"unknown job, escaped", "GET", "/jobs/a%2Fb", "", 404, `job "a/b" not found`, ""},
		{"unknown job exceptions", "GET", "/jobs/nope/exceptions", "", 404, `job "nope" not found`, ""},
		{"unknown job checkpoints", "GET", "/jobs/nope/checkpoints", "", 404, `job "nope" not found`, ""},
		{"unknown job checkpoint config", "GET", "/jobs/nope/checkpoints/config", "", 404, `job "nope" not found`, ""},
		{"unknown job details", "GET", "/jobs/nope/checkpoints/details/1", "", 404, `job "nope" not found`, ""},
		{"unknown job subtasks", "GET", "/jobs/nope/checkpoints/details/1/subtasks/1", "", 404, `job "nope" not found`, ""},
		{"unknown job trigger", "POST", "/jobs/nope/checkpoints", "", 404, `job "nope" not found`, ""},
		{"unknown job trigger status", "GET", "/jobs/nope/checkpoints/" + hex, "", 404, `job "nope" not found`, ""},
		{"unknown job savepoint", "POST", "/jobs/nope/savepoints", "", 404, `job "nope" not found`, ""},
		{"unknown job savepoint status", "GET", "/jobs/nope/savepoints/" + hex, "", 404, `job "nope" not found`, ""},
		{"unknown job stop", "POST", "/jobs/nope/stop", "", 404, `job "nope" not found`, ""},
		{"unknown job cancel", "PATCH", "/jobs/nope?mode=cancel", "", 404, `job "nope" not found`, ""},
		{"checkpoint id not a number", "GET", "/jobs/wordcount/checkpoints/details/abc", "", 400, `checkpoint id "abc" is not`, ""},
		{"checkpoint id negative", "GET", "/jobs/wordcount/checkpoints/details/-1", "", 400, `checkpoint id "-1" is not`, ""},
		{"checkpoint id overflows", "GET", "/jobs/wordcount/checkpoints/details/99999999999999999999", "", 400, "is not a non-negative integer", ""},
		{"unknown checkpoint", "GET", "/jobs/wordcount/checkpoints/details/99", "", 404, `checkpoint 99 of job "wordcount" not found`, ""},
		{"unknown checkpoint subtasks", "GET", "/jobs/wordcount/checkpoints/details/99/subtasks/1", "", 404, "checkpoint 99", ""},
		{"bad checkpoint id subtasks", "GET", "/jobs/wordcount/checkpoints/details/x/subtasks/1", "", 400, `checkpoint id "x"`, ""},
		{"unknown vertex", "GET", "/jobs/wordcount/checkpoints/details/1/subtasks/9", "", 404, `vertex "9" not found`, ""},
		{"bad trigger id", "GET", "/jobs/wordcount/checkpoints/0123", "", 400, `trigger id "0123" is not 32`, ""},
		{"upper-case trigger id", "GET", "/jobs/wordcount/checkpoints/" + strings.ToUpper(hex), "", 400, "lower-case hexadecimal", ""},
		{"unknown trigger id", "GET", "/jobs/wordcount/checkpoints/" + hex, "", 404, "no checkpoint request " + hex, ""},
		{"unknown savepoint trigger id", "GET", "/jobs/wordcount/savepoints/" + hex, "", 404, "no savepoint request " + hex, ""},
		{"bad savepoint trigger id", "GET", "/jobs/wordcount/savepoints/xyz", "", 400, `trigger id "xyz"`, ""},
		{"truncated JSON", "POST", "/jobs/wordcount/checkpoints", "{", 400, "malformed request body", ""},
		{"not an object", "POST", "/jobs/wordcount/checkpoints", "[]", 400, "malformed request body", ""},
		{"two objects", "POST", "/jobs/wordcount/checkpoints", "{} {}", 400, "data after the JSON object", ""},
		{"unknown field", "POST", "/jobs/wordcount/checkpoints", `{"type":"FULL"}`, 400, `unknown field "type"; accepted fields: checkpointType, triggerId`, ""},
		{"unsupported checkpoint type", "POST", "/jobs/wordcount/checkpoints", `{"checkpointType":"FULL"}`, 400, `checkpointType "FULL" is not supported`, ""},
		{"wrong field type", "POST", "/jobs/wordcount/checkpoints", `{"checkpointType":1}`, 400, "malformed request body", ""},
		{"bad trigger id in body", "POST", "/jobs/wordcount/checkpoints", `{"triggerId":"abc"}`, 400, `triggerId "abc" is not 32`, ""},
		{"body too large", "POST", "/jobs/wordcount/checkpoints", `{"triggerId":"` + strings.Repeat("a", 2000) + `"}`, 413, "larger than 1024 bytes", ""},
		{"savepoint with the stop field name", "POST", "/jobs/wordcount/savepoints", `{"targetDirectory":"/x"}`, 400,
			`unknown field "targetDirectory"; accepted fields: target-directory, cancel-job, triggerId, formatType`, ""},
		{"savepoint native format", "POST", "/jobs/wordcount/savepoints", `{"formatType":"NATIVE"}`, 400, `formatType "NATIVE" is not supported`, ""},
		{"savepoint bad cancel-job", "POST", "/jobs/wordcount/savepoints", `{"cancel-job":"yes"}`, 400, "malformed request body", ""},
		{"stop with the savepoint field name", "POST", "/jobs/wordcount/stop", `{"target-directory":"/x"}`, 400,
			`unknown field "target-directory"; accepted fields: targetDirectory, drain, triggerId, formatType`, ""},
		{"stop drain unsupported", "POST", "/jobs/wordcount/stop", `{"drain":true}`, 400, `"drain": true is not supported`, ""},
		{"stop bad drain", "POST", "/jobs/wordcount/stop", `{"drain":"yes"}`, 400, "malformed request body", ""},
		{"stop bad JSON", "POST", "/jobs/wordcount/stop", `{"drain":`, 400, "malformed request body", ""},
		{"cancel mode stop", "PATCH", "/jobs/wordcount?mode=stop", "", 400, `mode "stop" is not supported`, ""},
		{"cancel bad mode", "PATCH", "/jobs/wordcount?mode=nuke", "", 400, `mode "nuke" is not supported`, ""},
		{"cancel ended job", "PATCH", "/jobs/etl?mode=cancel", "", 409, `job "etl" has already ended (FINISHED)`, ""},
		{"checkpoint ended job", "POST", "/jobs/etl/checkpoints", "", 409, `job "etl" has ended (FINISHED): a checkpoint needs a running job`, ""},
		{"savepoint ended job", "POST", "/jobs/etl/savepoints", "", 409, "a savepoint needs a running job", ""},
		{"stop ended job", "POST", "/jobs/etl/stop", "", 409, "a stop needs a running job", ""},
		{"bad maxExceptions", "GET", "/jobs/etl/exceptions?maxExceptions=x", "", 400, `maxExceptions "x"`, ""},
		{"zero maxExceptions", "GET", "/jobs/etl/exceptions?maxExceptions=0", "", 400, `maxExceptions "0"`, ""},
		{"delete job", "DELETE", "/jobs/wordcount", "", 405, "method DELETE is not allowed on /jobs/wordcount", "GET, HEAD, PATCH"},
		{"post overview", "POST", "/overview", "", 405, "method POST is not allowed", "GET, HEAD"},
		{"put jobs", "PUT", "/jobs", "", 405, "", "GET, HEAD"},
		{"get stop", "GET", "/jobs/wordcount/stop", "", 405, "", "POST"},
		{"delete checkpoints", "DELETE", "/jobs/wordcount/checkpoints", "", 405, "", "GET, HEAD, POST"},
		{"post savepoint status", "POST", "/jobs/wordcount/savepoints/" + hex, "", 405, "", "GET, HEAD"},
		{"versioned wrong method", "DELETE", "/v1/jobs/wordcount", "", 405, "", "GET, HEAD, PATCH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.do(t, tt.method, tt.path, tt.body)
			if r.code != tt.code {
				t.Fatalf("%s %s: got %d %s, want %d", tt.method, tt.path, r.code, r.body, tt.code)
			}
			if msg := errorsOf(t, r); !strings.Contains(msg, tt.msg) {
				t.Errorf("error %q does not contain %q", msg, tt.msg)
			}
			if got := r.header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow %q, want %q", got, tt.allow)
			}
		})
	}
}
