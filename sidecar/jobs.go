package sidecar

import (
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// JobState is where a restore job is.
type JobState string

const (
	JobRunning   JobState = "running"
	JobSucceeded JobState = "succeeded"
	JobFailed    JobState = "failed"
)

// Job is a restore requested through the API. Reading it changes
// nothing: a wrapper may poll it as often as it likes.
type Job struct {
	ID      string         `json:"id"`
	State   JobState       `json:"state"`
	Request RestoreRequest `json:"request"`
	// Verdict is the data dir's, when the request asked to restore only
	// if needed.
	Verdict string `json:"verdict,omitempty"`
	// Action is what was done: "none" (the data dir was fit), "restored",
	// or what the caller must do instead ("rejoin-as-learner").
	Action string `json:"action,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Revision restored; Revisions replayed from deltas.
	Revision  int64     `json:"revision,omitempty"`
	Revisions int64     `json:"revisions,omitempty"`
	Error     string    `json:"error,omitempty"`
	Started   time.Time `json:"started"`
	Finished  time.Time `json:"finished,omitzero"`
	// Progress while running.
	BytesDownloaded int64 `json:"bytes_downloaded"`
	BytesTotal      int64 `json:"bytes_total"`
	Replayed        int64 `json:"replayed"`
}

// jobs holds the restore jobs of this process's life.
type jobs struct {
	mu   sync.Mutex
	byID map[string]*Job
	// busy maps a data dir to the job restoring it.
	busy map[string]string
}

func newJobs() *jobs { return &jobs{byID: map[string]*Job{}, busy: map[string]string{}} }

// start registers a job for dir, or returns the running one's ID.
func (j *jobs) start(req RestoreRequest) (*Job, string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if id, ok := j.busy[req.DataDir]; ok {
		return nil, id
	}
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	job := &Job{ID: hex.EncodeToString(b), State: JobRunning, Request: req, Started: time.Now().UTC()}
	j.byID[job.ID] = job
	j.busy[req.DataDir] = job.ID
	return job, ""
}

// update changes a job under the lock.
func (j *jobs) update(id string, f func(*Job)) {
	j.mu.Lock()
	defer j.mu.Unlock()
	job := j.byID[id]
	f(job)
	if job.State != JobRunning {
		delete(j.busy, job.Request.DataDir)
	}
}

// get returns a copy of the job.
func (j *jobs) get(id string) (Job, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	job, ok := j.byID[id]
	if !ok {
		return Job{}, false
	}
	return *job, true
}
