package network

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weirstream/weir/codec"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newTestCA(t *testing.T, dir, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &testCA{dir: dir, cert: cert, key: key, file: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, ca.file, "CERTIFICATE", der)
	return ca
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue signs a certificate for 127.0.0.1 valid from notBefore to notAfter,
// usable by both ends, and returns the files.
func (ca *testCA) issue(t *testing.T, name string, notBefore, notAfter time.Time) *TLSFiles {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	f := &TLSFiles{CertFile: filepath.Join(ca.dir, name+".pem"), KeyFile: filepath.Join(ca.dir, name+"-key.pem"), CAFile: ca.file}
	writePEM(t, f.CertFile, "CERTIFICATE", der)
	writePEM(t, f.KeyFile, "PRIVATE KEY", kder)
	return f
}

// TestMutualTLS: with certificates of the cluster's CA and the token, data
// flows; an expired client certificate, one of another CA, a plain TCP
// client and a wrong token over TLS are refused before any frame is read.
func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir, "cluster")
	other := newTestCA(t, dir, "other")
	now := time.Now()
	prod := newNode(t, Options{Token: "tok", TLS: ca.issue(t, "producer", now.Add(-time.Hour), now.Add(time.Hour))}, true)

	good := newNode(t, Options{Token: "tok", TLS: ca.issue(t, "consumer", now.Add(-time.Hour), now.Add(time.Hour))}, false)
	g := good.NewGate()
	in, err := Subscribe(g, prod.Addr(), "secure", codec.String())
	if err != nil {
		t.Fatal(err)
	}
	out, err := NewOutput(prod, "secure", codec.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out.Write([]string{"over", "tls"}, nil)
	out.Emit(Event{Kind: EndOfPartition})
	got, err := drain(t, g, in, ident, 10*time.Second)
	if err != nil || trunc(got) != `"over" "tls" end-of-partition ` {
		t.Fatalf("over TLS: %v, %v", trunc(got), err)
	}

	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"expired certificate", Options{Token: "tok", TLS: ca.issue(t, "expired", now.Add(-48*time.Hour), now.Add(-24*time.Hour))}, "tls: expired certificate"},
		{"another CA", Options{Token: "tok", TLS: other.issue(t, "intruder", now.Add(-time.Hour), now.Add(time.Hour))}, "TLS"},
		{"plain TCP", Options{Token: "tok"}, ""},
		{"wrong token", Options{Token: "nope", TLS: ca.issue(t, "tokenless", now.Add(-time.Hour), now.Add(time.Hour))}, "cluster token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := prod.Refused()
			cons := newNode(t, tc.opts, false)
			_, err := Subscribe(cons.NewGate(), prod.Addr(), "secure2", codec.String())
			if err == nil || !strings.Contains(err.Error(), prod.Addr()) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want a refusal naming %s (%q)", err, prod.Addr(), tc.want)
			}
			if tc.want == "cluster token" && !errors.Is(err, ErrRefused) {
				t.Fatalf("got %v, want ErrRefused", err)
			}
			deadline := time.Now().Add(5 * time.Second)
			for prod.Refused() == before && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			if prod.Refused() != before+1 {
				t.Fatalf("the producer did not count the refusal")
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"defaults", Options{}, ""},
		{"sender buffers", Options{SenderBuffers: 1}, "SenderBuffers is 1"},
		{"flush timeout", Options{FlushTimeout: time.Microsecond}, "FlushTimeout is 1µs"},
		{"no flush timeout", Options{FlushTimeout: -1}, ""},
		{"exclusive", Options{ExclusiveBuffers: -2}, "ExclusiveBuffers is -2"},
		{"TLS half set", Options{TLS: &TLSFiles{CertFile: "c.pem"}}, "CertFile, KeyFile and CAFile all set"},
		{"long token", Options{Token: strings.Repeat("t", 5000)}, "Token is 5000 bytes long"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.EnsureDefaults().Validate()
			if (tc.want == "") != (err == nil) || (err != nil && (!strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrInvalidOptions))) {
				t.Fatalf("Validate = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := New(Options{TLS: &TLSFiles{CertFile: "/nonexistent/c.pem", KeyFile: "/nonexistent/k.pem", CAFile: "/nonexistent/ca.pem"}}); err == nil ||
		!strings.Contains(err.Error(), "/nonexistent/c.pem") {
		t.Fatalf("New with missing certificate files: %v, want an error naming the file", err)
	}
}
