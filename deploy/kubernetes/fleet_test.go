package kubernetes

import (
	"maps"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fleetManifest checks that fleet.yaml hangs together: the drill
// CronJob's Indexed Job runs as many completions as the sample it draws,
// each container's flags parse in etcd-backup (bin), the metrics probe hits
// the port fleet serve listens on, and the credential file is a key of the
// secret mounted at its path. (TestManifestsApply applies it with the
// server dry run.)
func fleetManifest(t *testing.T, bin string) {
	objs := load(t, "fleet.yaml")
	cron, deploy := objs["CronJob/etcd-fleet-drill"], objs["Deployment/etcd-fleet"]
	if cron == nil || deploy == nil || objs["Secret/etcd-fleet"] == nil {
		t.Fatalf("fleet.yaml holds %v", slices.Collect(maps.Keys(objs)))
	}
	job := object(cron.get("spec", "jobTemplate", "spec").(map[string]any))
	completions, _ := job.get("completions").(float64)
	parallelism, _ := job.get("parallelism").(float64)
	if job.str("completionMode") != "Indexed" || parallelism < 1 || parallelism > completions {
		t.Fatalf("the drill Job: mode %q, %v completions, %v at a time", job.str("completionMode"), completions, parallelism)
	}
	for _, spec := range []object{object(job.get("template", "spec").(map[string]any)), object(deploy.get("spec", "template", "spec").(map[string]any))} {
		volumes := map[string]object{}
		for _, v := range list(spec.get("volumes")) {
			volumes[v.str("name")] = v
		}
		for _, c := range list(spec.get("containers")) {
			var args []string
			for _, a := range c.get("args").([]any) {
				args = append(args, a.(string))
			}
			if out, err := exec.Command(bin, append(args, "--help")...).CombinedOutput(); err != nil {
				t.Errorf("container %s: its flags do not parse: %v\n%s", c.str("name"), err, out)
			}
			for _, a := range args {
				if v, ok := strings.CutPrefix(a, "--sample="); ok && v != strconv.Itoa(int(completions)) {
					t.Errorf("the drills draw a sample of %s and the Job runs %v", v, completions)
				}
				if v, ok := strings.CutPrefix(a, "--listen="); ok {
					port, _ := c.get("livenessProbe", "httpGet", "port").(float64)
					if v[strings.LastIndex(v, ":")+1:] != strconv.Itoa(int(port)) {
						t.Errorf("container %s: probed on %v, listens on %s", c.str("name"), port, v)
					}
				}
			}
			for _, e := range list(c.get("env")) {
				if e.str("name") == "AWS_APPLICATION_CREDENTIALS_JSON" && !mounted(e.str("value"), c, volumes, objs) {
					t.Errorf("container %s: %s is in no secret it mounts", c.str("name"), e.str("value"))
				}
			}
		}
	}
}
