package rest

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// The checks here keep web pages the operator visits from using the API:
// the API's answers carry no CORS headers, so a page of another origin
// cannot read them, but a browser still sends some requests of such a
// page (a form, a no-cors fetch) and a DNS-rebinding page looks to the
// browser like the server's own origin. Bearer tokens are not cookies, so
// the browser attaches none to such requests; but the default loopback
// server has no token, and these checks are what protect it.

// securityHeaders are set on every answer: no framing of the dashboard
// (clickjacking its buttons), no sniffing of content types, no referrer.
func securityHeaders(h http.Header) {
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
}

// unsafeMethod reports whether m may change state.
func unsafeMethod(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return false
	}
	return true
}

// checkHost answers a request whose Host header is not the loopback
// server's own (a DNS-rebinding page names its own host name) with 403
// and returns false. Servers on other addresses are reached under names
// the server cannot know; their requests need the token.
func (s *Server) checkHost(w http.ResponseWriter, r *http.Request) bool {
	if !s.loopback {
		return true
	}
	port := s.listenPort()
	if hostAllowed(r.Host, port, r.TLS != nil) {
		return true
	}
	if port == "" {
		port = "PORT"
	}
	writeError(w, http.StatusForbidden, fmt.Sprintf("Host %q is not this server's: a server on a loopback address answers only to 127.0.0.1:%s, localhost:%s or [::1]:%s (a web page reaching it under another name is refused)", r.Host, port, port, port))
	return false
}

// hostAllowed reports whether host (a Host header) names a loopback
// address or localhost, at port when port is known.
func hostAllowed(host, port string, tls bool) bool {
	name, p, err := net.SplitHostPort(host)
	if err != nil { // no port: the scheme's default
		name, p = host, "80"
		if tls {
			p = "443"
		}
		name = strings.TrimSuffix(strings.TrimPrefix(name, "["), "]")
	}
	if port != "" && p != port {
		return false
	}
	if strings.EqualFold(name, "localhost") {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}

// listenPort is the port Serve listens on; "" when unknown (Handler
// mounted in a server of the caller's, which may listen anywhere: then
// only the host name is checked, which is what defeats DNS rebinding).
func (s *Server) listenPort() string {
	if a := s.Addr(); a != nil {
		if _, p, err := net.SplitHostPort(a.String()); err == nil {
			return p
		}
	}
	return ""
}

// checkOrigin answers a state-changing request sent by a page of another
// origin with 403 and returns false: its Origin header, when there is one,
// must be the server's own or one of Options.TrustedOrigins, and its
// Sec-Fetch-Site header, when there is one, may not say cross-site or
// same-site (another port of the same host is same-site, not same-origin).
// Clients other than browsers send neither header.
func (s *Server) checkOrigin(w http.ResponseWriter, r *http.Request) bool {
	if !unsafeMethod(r.Method) {
		return true
	}
	origin := r.Header.Get("Origin")
	trusted := origin != "" && s.trustedOrigins[normalizeOrigin(origin)]
	if site := strings.ToLower(r.Header.Get("Sec-Fetch-Site")); (site == "cross-site" || site == "same-site") && !trusted {
		writeError(w, http.StatusForbidden, fmt.Sprintf("a %s request sent by a page of another site (Sec-Fetch-Site: %s) is refused: use the dashboard this server serves, or a client such as weir", r.Method, site))
		return false
	}
	if origin == "" || trusted {
		return true
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	own := normalizeOrigin(scheme + "://" + r.Host)
	if own != "" && normalizeOrigin(origin) == own {
		return true
	}
	writeError(w, http.StatusForbidden, fmt.Sprintf("a %s request from origin %q is refused: only this server's own pages (%s) may change state; a proxy or UI at another origin must be listed in the trusted origins (weir run --rest-trusted-origins)", r.Method, origin, scheme+"://"+r.Host))
	return false
}

// normalizeOrigin is an origin in a form to compare: lower-case scheme and
// host, without the scheme's default port; "" when it is not an origin
// (including "null").
func normalizeOrigin(o string) string {
	u, err := url.Parse(strings.TrimSpace(o))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return ""
	}
	host := strings.ToLower(u.Hostname())
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	port := u.Port()
	if port == "" || (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		return u.Scheme + "://" + host
	}
	return u.Scheme + "://" + host + ":" + port
}

// jsonOnly wraps a state-changing API handler: the request must say
// Content-Type: application/json, which a cross-origin page can send only
// after a CORS preflight the server never grants (an HTML form sends
// form types or text/plain). Without it the request gets 415.
func jsonOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			got := "none"
			if ct != "" {
				got = fmt.Sprintf("%q", ct)
			}
			writeError(w, http.StatusUnsupportedMediaType, fmt.Sprintf("a %s request must carry the header Content-Type: application/json (it has %s), even with an empty body", r.Method, got))
			return
		}
		h(w, r)
	}
}
