package cluster

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/weirstream/weir/internal/network"
)

// TLSFiles names the PEM files of mutual TLS on the control plane. Every
// process presents its certificate and accepts only peers whose
// certificate the CA signed: the JobManager requires and verifies the
// TaskManager's, and the TaskManager verifies the JobManager's against the
// host it dials.
type TLSFiles struct {
	// CertFile and KeyFile are this process's certificate chain and key.
	CertFile, KeyFile string
	// CAFile holds the certificates of the CAs that sign the cluster's
	// certificates.
	CAFile string
}

// config reads the files into a tls.Config for both roles.
func (f *TLSFiles) config() (*tls.Config, error) {
	if f.CertFile == "" || f.KeyFile == "" || f.CAFile == "" {
		return nil, fmt.Errorf("control-plane TLS needs a certificate, its key and a CA file (got certificate %q, key %q, CA %q)", f.CertFile, f.KeyFile, f.CAFile)
	}
	nf := network.TLSFiles{CertFile: f.CertFile, KeyFile: f.KeyFile, CAFile: f.CAFile}
	return nf.Load("control-plane TLS")
}

// IsLoopback reports whether host (of a host:port address) is reachable
// from this machine only. An empty host listens on every interface.
func IsLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkToken validates a cluster token.
func checkToken(token string) error {
	if strings.ContainsAny(token, " \t\r\n") {
		return fmt.Errorf("the cluster token contains white space: use printable characters without spaces")
	}
	if len(token) > 4096 {
		return fmt.Errorf("the cluster token is %d bytes long: use at most 4096", len(token))
	}
	return nil
}

// tokenCredentials sends the cluster token with every call.
type tokenCredentials struct {
	token  string
	secure bool
}

func (c tokenCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + c.token}, nil
}

func (c tokenCredentials) RequireTransportSecurity() bool { return false }

// authorize checks the call's token against token ("" for none).
func authorize(ctx context.Context, token string) error {
	var got string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			got = strings.TrimPrefix(v[0], "Bearer ")
		}
	}
	switch {
	case token == "" && got == "":
		return nil
	case token == "":
		return status.Error(codes.Unauthenticated, "the JobManager has no cluster token but the TaskManager sent one: give both the same --cluster-token (or WEIR_CLUSTER_TOKEN), or neither")
	case subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1:
		if got == "" {
			return status.Error(codes.Unauthenticated, "the JobManager requires a cluster token: start the TaskManager with the JobManager's --cluster-token (or WEIR_CLUSTER_TOKEN)")
		}
		return status.Error(codes.Unauthenticated, "wrong cluster token: start the TaskManager with the JobManager's --cluster-token (or WEIR_CLUSTER_TOKEN)")
	}
	return nil
}

func unaryAuth(token string) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if err := authorize(ctx, token); err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
}

func streamAuth(token string) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if err := authorize(ss.Context(), token); err != nil {
			return err
		}
		return h(srv, ss)
	}
}

// transportCredentials are the server's or client's credentials for files
// (insecure without).
func transportCredentials(files *TLSFiles) (credentials.TransportCredentials, error) {
	if files == nil {
		return nil, nil
	}
	conf, err := files.config()
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(conf), nil
}
