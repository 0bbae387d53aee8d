package network

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLSFiles names the PEM files of mutual TLS. Every process presents its
// certificate and accepts only peers whose certificate the CA signed: a
// listener requires and verifies the dialer's certificate, and a dialer
// verifies the listener's against the host it dialed.
type TLSFiles struct {
	// CertFile and KeyFile are this process's certificate chain and key.
	CertFile, KeyFile string
	// CAFile holds the certificates of the CAs that sign the cluster's
	// certificates.
	CAFile string
}

// Load reads the files into a mutual-TLS config for both roles (TLS 1.3,
// client certificates required and verified against CAFile). Errors start
// with what ("network TLS", "control-plane TLS").
func (f *TLSFiles) Load(what string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("%s: load certificate %s and key %s: %w", what, f.CertFile, f.KeyFile, err)
	}
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("%s: read CA file: %w", what, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: CA file %s holds no PEM certificate", what, f.CAFile)
	}
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}, nil
}
