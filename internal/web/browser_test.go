package web_test

// Browser tests of the dashboard: headless Chromium driven by chromedp.
// They skip when Chromium is missing, unless WEIR_REQUIRE_CHROMIUM=1 (as in
// CI), which makes them fail instead. WEIR_CHROMIUM names another browser
// binary. WEIR_SCREENSHOTS=dir also saves screenshots of the main pages
// there (docs/screenshots holds the checked-in ones):
//
//	WEIR_SCREENSHOTS=$PWD/docs/screenshots go test ./internal/web -run Browser

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumPath finds the browser, or skips (fails under
// WEIR_REQUIRE_CHROMIUM=1).
func chromiumPath(t *testing.T) string {
	t.Helper()
	candidates := []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"}
	if p := os.Getenv("WEIR_CHROMIUM"); p != "" {
		candidates = []string{p}
	}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	msg := fmt.Sprintf("Chromium not found (tried %s): install it (Debian: apt-get install chromium) or set WEIR_CHROMIUM", strings.Join(candidates, ", "))
	if os.Getenv("WEIR_REQUIRE_CHROMIUM") == "1" {
		t.Fatal(msg + "; WEIR_REQUIRE_CHROMIUM=1 requires it")
	}
	t.Skip(msg)
	return ""
}

// browser is a headless Chromium tab and the page errors it saw.
type browser struct {
	ctx context.Context

	mu     sync.Mutex
	errors []string // uncaught exceptions and console errors
}

// newBrowser starts a fresh headless Chromium (its own profile directory)
// that ends with the test; every action must finish within timeout.
func newBrowser(t *testing.T, timeout time.Duration) *browser {
	t.Helper()
	path := chromiumPath(t)
	profile := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("force-color-profile", "srgb"),
		// A host name of an attacker's that resolves to this machine, as
		// after DNS rebinding (browser_security_test.go).
		chromedp.Flag("host-resolver-rules", "MAP rebind.example 127.0.0.1"),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1400, 1000),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	b := &browser{}
	ctx, cancelTab := chromedp.NewContext(allocCtx, chromedp.WithListener(b.listen))
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
		cancelAlloc() // waits for the browser process to end
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start Chromium %s: %v", path, err)
	}
	b.ctx = ctx
	return b
}

func (b *browser) listen(ev any) {
	var msg string
	switch ev := ev.(type) {
	case *runtime.EventExceptionThrown:
		msg = (&chromedp.ExceptionError{ExceptionDetails: ev.ExceptionDetails}).Error()
	case *runtime.EventConsoleAPICalled:
		if ev.Type != runtime.ConsoleAPICalledTypeError {
			return
		}
		var args []string
		for _, a := range ev.Args {
			args = append(args, string(a.Value)+a.Description)
		}
		msg = "console.error: " + strings.Join(args, " ")
	default:
		return
	}
	b.mu.Lock()
	b.errors = append(b.errors, msg)
	b.mu.Unlock()
}

// checkNoPageErrors fails the test if the page threw or logged an error.
func (b *browser) checkNoPageErrors(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errors {
		t.Errorf("page error: %s", e)
	}
}

func (b *browser) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v%s", what, err, b.context())
	}
}

// waitFor polls a JavaScript predicate until it is true.
func (b *browser) waitFor(t *testing.T, what, predicate string) {
	t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](predicate, chromedp.WithPollingInterval(50*time.Millisecond),
		chromedp.WithPollingTimeout(20*time.Second))); err != nil {
		t.Fatalf("waiting until %s: %v%s", what, err, b.context())
	}
}

func evaluate[T any](t *testing.T, b *browser, expression string) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expression))
	if err != nil {
		t.Fatalf("evaluate %s: %v%s", expression, err, b.context())
	}
	return v
}

// context describes the page for a failure message: the banner, the
// operation status and the page errors.
func (b *browser) context() string {
	ctx, cancel := context.WithTimeout(b.ctx, 2*time.Second)
	defer cancel()
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](
		`"location " + location.hash + "; banner: " + document.getElementById("banner").textContent + "; operation: " + (document.getElementById("op-status")?.textContent ?? "")`))
	if err != nil {
		text = "(page unavailable: " + err.Error() + ")"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmt.Sprintf("\n  page: %s\n  page errors: %q", text, b.errors)
}

// screenshot saves the page as dir/name.png when WEIR_SCREENSHOTS=dir is
// set, with the viewport as tall as the page.
func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	dir := os.Getenv("WEIR_SCREENSHOTS")
	if dir == "" {
		return
	}
	height := evaluate[int64](t, b, `document.documentElement.scrollHeight`)
	b.do(t, "fit the viewport to the page", chromedp.EmulateViewport(1400, height))
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	b.do(t, "restore the viewport", chromedp.ResetViewport())
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", filepath.Join(dir, name+".png"))
}

// serve runs h's server on a random loopback port until the test ends.
type server interface {
	ServeListener(ctx context.Context, ln net.Listener) error
	Close() error
}

func serve(t *testing.T, s server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- s.ServeListener(context.Background(), ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}
