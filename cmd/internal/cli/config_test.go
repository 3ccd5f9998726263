package cli

import (
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// A Service named etcdkit gives every container of its namespace
// ETCDKIT_SERVICE_HOST, ETCDKIT_PORT and the rest (Kubernetes' service
// links): they are no flags, and no error; a misspelt flag still is one.
func TestServiceLinksAreNoFlags(t *testing.T) {
	for _, kv := range [][2]string{
		{"ETCDKIT_SERVICE_HOST", "10.0.0.7"}, {"ETCDKIT_SERVICE_PORT", "8080"}, {"ETCDKIT_SERVICE_PORT_API", "8080"},
		{"ETCDKIT_PORT", "tcp://10.0.0.7:8080"}, {"ETCDKIT_PORT_8080_TCP", "tcp://10.0.0.7:8080"},
		{"ETCDKIT_PORT_8080_TCP_PROTO", "tcp"}, {"ETCDKIT_PORT_8080_TCP_PORT", "8080"}, {"ETCDKIT_PORT_8080_TCP_ADDR", "10.0.0.7"},
	} {
		t.Setenv(kv[0], kv[1])
	}
	cmd := &cobra.Command{Use: "x"}
	store := cmd.Flags().String("store", "", "")
	cmd.Flags().String("config", "", "")
	t.Setenv("ETCDKIT_STORE", "file:///b")
	if err := Bind(cmd, "config"); err != nil || *store != "file:///b" {
		t.Fatalf("with service links: %v (store %q)", err, *store)
	}
	t.Setenv("ETCDKIT_STOER", "file:///b")
	if err := Bind(cmd, "config"); err == nil || !strings.Contains(err.Error(), "ETCDKIT_STOER") {
		t.Fatalf("a misspelt flag: %v", err)
	}
}
