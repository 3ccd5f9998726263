package images

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// sbom is what the test reads of a CycloneDX BOM.
type sbom struct {
	BOMFormat   string `json:"bomFormat"`
	SpecVersion string `json:"specVersion"`
	Metadata    struct {
		Component sbomComponent `json:"component"`
	} `json:"metadata"`
	Components   []sbomComponent `json:"components"`
	Dependencies []struct {
		Ref       string   `json:"ref"`
		DependsOn []string `json:"dependsOn"`
	} `json:"dependencies"`
}

type sbomComponent struct {
	Ref     string `json:"bom-ref"`
	Type    string `json:"type"`
	Name    string `json:"name"`
	Version string `json:"version"`
	PURL    string `json:"purl"`
}

// checkSBOM reads the SBOM tools/image.sh wrote beside the layout for the
// image of binary n (with etcd, the wrapper's image of that etcd server)
// whose manifest is digest, and the binaries' own: the image is its
// subject, by digest, and it lists Debian's CA bundle at the version the
// label says and every module each binary in the image (bins, as taken
// out of it) was built from, at the version Go recorded in the binary.
func checkSBOM(t *testing.T, out, n, etcd, digest string, labels map[string]string, bins map[string][]byte) {
	t.Helper()
	name := n
	if etcd != "" {
		name += "-etcd" + etcd
	}
	var s sbom
	readJSON(t, filepath.Join(out, "sbom", fmt.Sprintf("%s_linux_%s.cdx.json", name, runtime.GOARCH)), &s)
	subject := s.Metadata.Component
	if s.BOMFormat != "CycloneDX" || s.SpecVersion != "1.6" || subject.Type != "container" || subject.Name != repository+"/"+n ||
		subject.Version != labels["org.opencontainers.image.version"] || !strings.Contains(subject.PURL, strings.ReplaceAll(digest, ":", "%3A")) {
		t.Errorf("SBOM of %s: %s %s, subject %+v; want the container %s/%s@%s", name, s.BOMFormat, s.SpecVersion, subject, repository, n, digest)
	}
	have := map[string]sbomComponent{}
	for _, c := range s.Components {
		have[c.Name+"@"+c.Version] = c
	}
	if _, ok := have["ca-certificates@"+labels["org.etcdkit.ca-certificates"]]; !ok {
		t.Errorf("SBOM of %s: no ca-certificates %s", name, labels["org.etcdkit.ca-certificates"])
	}
	if len(s.Dependencies) == 0 || s.Dependencies[0].Ref != subject.Ref || len(s.Dependencies[0].DependsOn) != 1+len(bins) {
		t.Errorf("SBOM of %s: the image's dependencies %+v, want the CA bundle and %d binaries", name, s.Dependencies[:min(1, len(s.Dependencies))], len(bins))
	}
	for bin, data := range bins {
		info, err := buildinfo.Read(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		main, ok := have[info.Main.Path+"@"+info.Main.Version]
		if !ok || main.Type != "application" || !slices.Contains(s.Dependencies[0].DependsOn, main.Ref) {
			t.Errorf("SBOM of %s: %s's main module %s@%s is not an application the image holds (%+v)", name, bin, info.Main.Path, info.Main.Version, main)
		}
		missing := 0
		for _, d := range info.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			if _, ok := have[d.Path+"@"+d.Version]; !ok {
				missing++
				t.Errorf("SBOM of %s: %s's module %s@%s is missing", name, bin, d.Path, d.Version)
			}
		}
		t.Logf("SBOM of %s: %s and its %d modules", name, bin, len(info.Deps)-missing)

		// The binary's own SBOM, beside it.
		var own sbom
		readJSON(t, filepath.Join(out, "bin", "linux_"+runtime.GOARCH, bin+".cdx.json"), &own)
		if own.Metadata.Component.Ref != main.Ref || len(own.Components) != len(info.Deps) {
			t.Errorf("%s.cdx.json: subject %+v with %d components; want %s with %d", bin, own.Metadata.Component, len(own.Components), main.Ref, len(info.Deps))
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
