package rest_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weirstream/weir/internal/rest"
	"github.com/weirstream/weir/internal/web"
)

// FuzzAPI feeds random methods, paths, tokens and bodies to the API: no
// answer is a 5xx, and every answer but the dashboard's files is JSON,
// every error a {"errors": [...]} body.
func FuzzAPI(f *testing.F) {
	hex := strings.Repeat("ab", 16)
	seeds := []struct{ method, target, auth, body string }{
		{"GET", "jobs", "Bearer tok", ""},
		{"GET", "jobs/overview", "Bearer tok", ""},
		{"GET", "overview", "Bearer tok", ""},
		{"GET", "config", "Bearer tok", ""},
		{"GET", "taskmanagers", "Bearer tok", ""},
		{"GET", "v1/jobs/wordcount", "Bearer tok", ""},
		{"GET", "jobs/wordcount/exceptions?maxExceptions=-3", "Bearer tok", ""},
		{"GET", "jobs/wordcount/checkpoints", "Bearer tok", ""},
		{"GET", "jobs/wordcount/checkpoints/config", "Bearer tok", ""},
		{"GET", "jobs/wordcount/checkpoints/details/1", "Bearer tok", ""},
		{"GET", "jobs/wordcount/checkpoints/details/1/subtasks/2", "Bearer tok", ""},
		{"GET", "jobs/wordcount/checkpoints/details/9223372036854775807/subtasks/x", "Bearer tok", ""},
		{"GET", "jobs/wordcount/checkpoints/" + hex, "Bearer tok", ""},
		{"GET", "jobs/wordcount/savepoints/" + hex, "Bearer tok", ""},
		{"POST", "jobs/wordcount/checkpoints", "Bearer tok", `{"checkpointType":"CONFIGURED"}`},
		{"POST", "jobs/wordcount/checkpoints", "Bearer tok", `{"triggerId":"` + hex + `"}`},
		{"POST", "jobs/wordcount/savepoints", "Bearer tok", `{"target-directory":"/tmp/x","cancel-job":false}`},
		{"POST", "jobs/etl/stop", "Bearer tok", `{"targetDirectory":"/tmp/x","drain":true}`},
		{"POST", "jobs/wordcount/stop", "Bearer tok", "{\"targetDirectory\":\"\xff\"}"},
		{"PATCH", "jobs/wordcount?mode=cancel", "Bearer tok", ""},
		{"PATCH", "jobs/wordcount?mode=%zz", "Bearer tok", ""},
		{"DELETE", "jobs/wordcount", "Bearer tok", ""},
		{"OPTIONS", "jobs", "Bearer tok", ""},
		{"CONNECT", "jobs", "Bearer tok", ""},
		{"GET", "jobs/../overview", "Bearer tok", ""},
		{"GET", "jobs//wordcount", "Bearer tok", ""},
		{"GET", "v1", "Bearer tok", ""},
		{"GET", "jobs/%00/checkpoints", "Bearer tok", ""},
		{"POST", "jobs/wordcount/checkpoints", "", `{`},
		{"POST", "jobs/wordcount/checkpoints", "Bearer tok", `[1,2,{"a":` + strings.Repeat("[", 1000)},
		{"GET", "", "Bearer tok", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.target, s.auth, []byte(s.body))
	}
	jm, _, _ := fixture()
	srv, err := rest.New(jm, rest.Options{Token: "tok", MaxOperations: 8, MaxBodyBytes: 4096})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { srv.Close() })
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, method, target, auth string, body []byte) {
		req, err := http.NewRequest(method, "http://127.0.0.1:8081/"+target, bytes.NewReader(body))
		if err != nil {
			return // not a request a client could send
		}
		req.Header.Set("Authorization", auth)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s /%s %q: %d %s", method, target, body, rec.Code, rec.Body)
		}
		if rec.Code >= 300 && rec.Code < 400 {
			return // ServeMux redirects to the clean path
		}
		if rec.Code == http.StatusOK && web.Has(req.URL.Path) {
			return // a file of the web dashboard
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s /%s: %d, not JSON: %q", method, target, rec.Code, rec.Body)
		}
		if rec.Code >= 400 {
			var e rest.ErrorResponse
			if json.Unmarshal(rec.Body.Bytes(), &e) != nil || len(e.Errors) == 0 || e.Errors[0] == "" {
				t.Fatalf("%s /%s: %d without an error message: %s", method, target, rec.Code, rec.Body)
			}
		}
	})
}
