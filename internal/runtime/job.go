package runtime

import (
	"context"
	"errors"
	"sync"
)

// Job runs a set of tasks in this process.
type Job struct {
	tasks []*Task
	stop  chan struct{}
}

// NewJob returns a job over tasks; nothing starts until Run. stop is closed
// when the job stops (a task failed or the context ended); the tasks' record
// writers give up a blocked send when it closes.
func NewJob(tasks []*Task, stop chan struct{}) *Job { return &Job{tasks: tasks, stop: stop} }

// Tasks returns the job's tasks.
func (j *Job) Tasks() []*Task { return j.tasks }

// Run runs every task on its own goroutine and waits for all of them. The
// first task error cancels the others and is returned; cancelling ctx stops
// every task and returns ctx's error. Run returns only once every goroutine it
// started has ended.
func (j *Job) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var once sync.Once
	release := context.AfterFunc(ctx, func() { once.Do(func() { close(j.stop) }) })
	defer func() {
		if release() {
			once.Do(func() { close(j.stop) })
		}
	}()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for _, t := range j.tasks {
		wg.Go(func() {
			err := t.Run(ctx)
			if err == nil {
				return
			}
			mu.Lock()
			if first == nil && !(errors.Is(err, context.Canceled) && ctx.Err() != nil) {
				first = err
			}
			mu.Unlock()
			cancel(err)
		})
	}
	wg.Wait()
	if first != nil {
		return first
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return ctx.Err()
}
