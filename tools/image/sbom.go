package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
)

// An image's SBOM is CycloneDX, made of the SBOMs tools/image.sh had
// cyclonedx-gomod write beside each binary from its module graph
// (<bin>/<os>_<arch>/<name>.cdx.json): the image is the BOM's subject, each
// binary in it a component, every module of every binary a component once,
// and Debian's CA bundle a component of its own. The binaries' own BOMs
// keep their structure; only what the image adds is written here, so this
// needs no CycloneDX library.

// bom is the part of a CycloneDX BOM this reads and writes; components
// and dependencies pass through as they are.
type bom struct {
	Schema       string           `json:"$schema,omitempty"`
	BOMFormat    string           `json:"bomFormat"`
	SpecVersion  string           `json:"specVersion"`
	Version      int              `json:"version"`
	Metadata     bomMetadata      `json:"metadata"`
	Components   []map[string]any `json:"components,omitempty"`
	Dependencies []bomDependency  `json:"dependencies,omitempty"`
}

type bomMetadata struct {
	Timestamp  string         `json:"timestamp,omitempty"`
	Tools      any            `json:"tools,omitempty"`
	Component  map[string]any `json:"component"`
	Properties []bomProperty  `json:"properties,omitempty"`
}

type bomProperty struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type bomDependency struct {
	Ref       string   `json:"ref"`
	DependsOn []string `json:"dependsOn,omitempty"`
}

// imageSBOM writes the SBOM of one platform's image of binary n (with
// etcd, the wrapper's image of that etcd server), whose manifest digest is
// digest, to <o.sbom>/<n>[-etcd<etcd>]_<os>_<arch>.cdx.json.
func imageSBOM(o options, n, etcd, goos, arch, digest string) error {
	dir := filepath.Join(o.bin, goos+"_"+arch)
	binaries := []string{n}
	if etcd != "" {
		binaries = append(binaries, "etcd-"+etcd)
	}
	image := o.repository + "/" + n
	subject := map[string]any{
		"bom-ref": image + "@" + digest,
		"type":    "container",
		"name":    image,
		"version": o.version,
		// The package URL of an OCI image names it by digest.
		"purl": fmt.Sprintf("pkg:oci/%s@%s?arch=%s&repository_url=%s", n, url.QueryEscape(digest), arch, url.QueryEscape(image)),
	}
	out := bom{
		Schema: "http://cyclonedx.org/schema/bom-1.6.schema.json", BOMFormat: "CycloneDX", SpecVersion: "1.6", Version: 1,
		Metadata: bomMetadata{Timestamp: o.created.UTC().Format("2006-01-02T15:04:05Z"), Component: subject, Properties: []bomProperty{
			{Name: "org.opencontainers.image.revision", Value: o.revision},
			{Name: "org.opencontainers.image.source", Value: o.source},
		}},
	}
	ca := map[string]any{
		"bom-ref":     "pkg:deb/debian/ca-certificates@" + o.caVersion,
		"type":        "data",
		"name":        "ca-certificates",
		"version":     o.caVersion,
		"purl":        "pkg:deb/debian/ca-certificates@" + url.QueryEscape(o.caVersion) + "?arch=all",
		"description": "Debian's CA bundle, /etc/ssl/certs/ca-certificates.crt",
	}
	seen := map[string]bool{}
	deps := map[string][]string{}
	top := []string{ca["bom-ref"].(string)}
	out.Components = append(out.Components, ca)
	for _, b := range binaries {
		path := filepath.Join(dir, b+".cdx.json")
		raw, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("the SBOM of %s (tools/image.sh writes it with cyclonedx-gomod): %w", b, err)
		}
		var in bom
		if err := json.Unmarshal(raw, &in); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if out.Metadata.Tools == nil {
			out.Metadata.Tools = in.Metadata.Tools
		}
		binary := in.Metadata.Component
		ref, _ := binary["bom-ref"].(string)
		if ref == "" {
			return fmt.Errorf("%s: no metadata.component.bom-ref", path)
		}
		// The binary's file in the image, and its hashes, which the
		// tool records as properties of the BOM.
		binary["properties"] = append(in.Metadata.Properties, bomProperty{Name: "org.etcdkit.image.path", Value: imagePath(o, n, b)})
		top = append(top, ref)
		for _, c := range append([]map[string]any{binary}, in.Components...) {
			r, _ := c["bom-ref"].(string)
			if seen[r] {
				continue
			}
			seen[r] = true
			out.Components = append(out.Components, c)
		}
		for _, d := range in.Dependencies {
			for _, on := range d.DependsOn {
				if !slices.Contains(deps[d.Ref], on) {
					deps[d.Ref] = append(deps[d.Ref], on)
				}
			}
			if _, ok := deps[d.Ref]; !ok {
				deps[d.Ref] = nil
			}
		}
	}
	out.Dependencies = append(out.Dependencies, bomDependency{Ref: subject["bom-ref"].(string), DependsOn: top})
	for _, ref := range slices.Sorted(maps.Keys(deps)) {
		out.Dependencies = append(out.Dependencies, bomDependency{Ref: ref, DependsOn: deps[ref]})
	}
	name := n
	if etcd != "" {
		name += "-etcd" + etcd
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.sbom, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(o.sbom, fmt.Sprintf("%s_%s_%s.cdx.json", name, goos, arch)), append(b, '\n'), 0o644)
}

// imagePath is where binary b is in image n.
func imagePath(o options, n, b string) string {
	switch {
	case b != n:
		return "/usr/local/bin/etcd"
	case o.root:
		return "/" + n
	}
	return "/usr/local/bin/" + n
}
