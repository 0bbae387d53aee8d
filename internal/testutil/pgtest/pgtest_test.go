package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

// TestServer starts the shared server and checks the settings the
// connector's tests rely on.
func TestServer(t *testing.T) {
	srv := Shared(t)
	url := srv.NewDatabase(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	for name, want := range map[string]string{"wal_level": "logical", "max_prepared_transactions": "64", "fsync": "off", "listen_addresses": "127.0.0.1"} {
		var got string
		if err := c.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}
