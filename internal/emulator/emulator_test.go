package emulator

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

func TestStartStopRestart(t *testing.T) {
	for _, kind := range []Kind{S3, GCS, Azure} {
		t.Run(string(kind), func(t *testing.T) {
			s := Require(t, kind)
			get := func() int {
				resp, err := http.Get(s.Endpoint)
				if err != nil {
					return 0
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			if get() == 0 {
				t.Fatalf("%s does not answer at %s", kind, s.Endpoint)
			}
			if err := s.Restart(context.Background()); err != nil {
				t.Fatal(err)
			}
			if get() == 0 {
				t.Fatalf("%s does not answer after restart", kind)
			}
			s.Stop()
			if get() != 0 {
				t.Fatalf("%s still answers after Stop", kind)
			}
		})
	}
}

// Bucket names are valid on every cloud, and never repeat.
func TestBucketNames(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9]([a-z0-9]|-[a-z0-9]){2,62}$`)
	seen := map[string]bool{}
	for _, name := range []string{"TestX", "Test_With__Underscores/and/sub-tests", strings.Repeat("LongName", 20), "9", "__"} {
		t.Run(name, func(t *testing.T) {
			b := Bucket(t)
			if !valid.MatchString(b) || len(b) > 63 || seen[b] {
				t.Fatalf("bucket %q for test %q: invalid or repeated", b, t.Name())
			}
			seen[b] = true
		})
	}
}
