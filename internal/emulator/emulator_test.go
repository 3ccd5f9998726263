package emulator

import (
	"context"
	"net/http"
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
