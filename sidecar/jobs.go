package sidecar

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"

	"github.com/etcdkit/etcdkit/sidecar/api"
)

// jobs holds the restore jobs of this process's life.
type jobs struct {
	mu   sync.Mutex
	byID map[string]*api.Job
	// busy maps a data dir to the job restoring it.
	busy map[string]string
}

func newJobs() *jobs { return &jobs{byID: map[string]*api.Job{}, busy: map[string]string{}} }

// start registers a job for dir, or returns the running one's ID.
func (j *jobs) start(req api.RestoreRequest) (*api.Job, string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if id, ok := j.busy[req.DataDir]; ok {
		return nil, id
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	job := &api.Job{ID: hex.EncodeToString(b), State: api.JobRunning, Request: req, Started: time.Now().UTC()}
	j.byID[job.ID] = job
	j.busy[req.DataDir] = job.ID
	return job, ""
}

// update changes a job under the lock.
func (j *jobs) update(id string, f func(*api.Job)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	job := j.byID[id]
	f(job)
	if job.State != api.JobRunning {
		delete(j.busy, job.Request.DataDir)
	}
}

// get returns a copy of the job.
func (j *jobs) get(id string) (api.Job, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	job, ok := j.byID[id]
	if !ok {
		return api.Job{}, false
	}
	return *job, true
}
