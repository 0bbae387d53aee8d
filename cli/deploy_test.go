package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/weirstream/weir/internal/config"
	"github.com/weirstream/weir/internal/deploy"
)

// TestKubernetesManifests checks what can be checked here of
// deploy/kubernetes (no cluster runs in the tests): the ConfigMap's
// weir.yaml is valid and applies to both roles, and every flag the
// Deployments pass exists on their command.
func TestKubernetesManifests(t *testing.T) {
	roles := map[string]func(deploy.Registry) *cobra.Command{"jobmanager": newJobManagerCommand, "taskmanager": newTaskManagerCommand}
	var cm struct {
		Data map[string]string `yaml:"data"`
	}
	data, err := os.ReadFile("../deploy/kubernetes/configmap.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &cm); err != nil {
		t.Fatal(err)
	}
	file, err := config.Parse("weir.yaml", []byte(cm.Data["weir.yaml"]))
	if err != nil {
		t.Fatalf("the ConfigMap's weir.yaml: %v", err)
	}
	for role, mk := range roles {
		c := mk(bundledJobs())
		if err := file.ApplyShared(c.Flags(), "weir "+role); err != nil {
			t.Errorf("weir.yaml on weir %s: %v", role, err)
		}
	}
	if got := func() string {
		c := newTaskManagerCommand(bundledJobs())
		file.ApplyShared(c.Flags(), "tm")
		return c.Flags().Lookup("jobmanager").Value.String()
	}(); got != "weir-jobmanager:6123" {
		t.Errorf("the TaskManager's --jobmanager from weir.yaml is %q", got)
	}
	for _, name := range []string{"jobmanager", "taskmanager"} {
		data, err := os.ReadFile("../deploy/kubernetes/" + name + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(strings.NewReader(string(data)))
		for {
			var doc struct {
				Kind string `yaml:"kind"`
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct {
								Args []string `yaml:"args"`
							} `yaml:"containers"`
						} `yaml:"spec"`
					} `yaml:"template"`
				} `yaml:"spec"`
			}
			if err := dec.Decode(&doc); err != nil {
				break
			}
			if doc.Kind != "Deployment" {
				continue
			}
			args := doc.Spec.Template.Spec.Containers[0].Args
			c := roles[args[0]](bundledJobs())
			for _, a := range args[1:] {
				flag, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
				if c.Flags().Lookup(flag) == nil {
					t.Errorf("%s.yaml passes %s, which weir %s does not have", name, a, args[0])
				}
			}
		}
	}
}
