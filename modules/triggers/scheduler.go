package triggers

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/google/uuid"
	"github.com/jonboulle/clockwork"
	"github.com/rs/zerolog"
)

// SchedulerOptions tune the scheduler; zero values are the production defaults.
type SchedulerOptions struct {
	// Poll is how often the triggers table is re-read so that changes made through another
	// replica are picked up (default 2s). Changes made through this replica apply at once.
	Poll time.Duration
	// Clock drives gocron and the window computation (default the real clock; tests pass a
	// fake one).
	Clock clockwork.Clock
	// Elector decides whether this replica runs jobs; nil runs them (a single process, as on
	// SQLite). The composition root passes an AdvisoryElector on PostgreSQL.
	Elector gocron.Elector
	// Lookback bounds how late a firing may run and still count for its window
	// (default 1 minute): a firing later than that is dropped, never run for a later window.
	Lookback time.Duration
}

// Scheduler keeps one gocron job per enabled schedule trigger and fires runs. Every firing
// first claims its window in the database (Service.claim), so a window starts at most one
// run however many replicas fire it; the elector makes the leader the only one to try.
type Scheduler struct {
	svc  *Service
	log  zerolog.Logger
	opts SchedulerOptions

	mu   sync.Mutex // guards gs and jobs, and serialises Sync (load + apply)
	gs   gocron.Scheduler
	jobs map[string]scheduledJob
	base context.Context // firings run under it; cancelled by Stop
	stop context.CancelFunc
	done chan struct{}
}

type scheduledJob struct {
	rev int64
	id  uuid.UUID
}

// NewScheduler builds a scheduler of svc's schedule triggers; Start runs it.
func NewScheduler(svc *Service, logger zerolog.Logger, opts SchedulerOptions) (*Scheduler, error) {
	if svc == nil {
		return nil, errors.New("triggers: nil service")
	}
	if opts.Poll <= 0 {
		opts.Poll = 2 * time.Second
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.Lookback <= 0 {
		opts.Lookback = time.Minute
	}
	return &Scheduler{svc: svc, log: logger, opts: opts, jobs: map[string]scheduledJob{}}, nil
}

// Start schedules every enabled schedule trigger and starts polling for changes. Windows
// that passed while the service was down are not fired (gocron schedules from now on).
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.gs != nil {
		s.mu.Unlock()
		return errors.New("triggers: scheduler already started")
	}
	gopts := []gocron.SchedulerOption{gocron.WithClock(s.opts.Clock), gocron.WithLocation(time.UTC)}
	if s.opts.Elector != nil {
		gopts = append(gopts, gocron.WithDistributedElector(s.opts.Elector))
	}
	gs, err := gocron.NewScheduler(gopts...)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	s.gs = gs
	s.base, s.stop = context.WithCancel(context.WithoutCancel(ctx))
	s.done = make(chan struct{})
	gs.Start()
	s.mu.Unlock()

	if err := s.Sync(ctx); err != nil {
		// The poller retries; a database hiccup at start must not stop the plane.
		s.log.Warn().Err(err).Msg("loading schedule triggers")
	}
	go s.poll()
	return nil
}

func (s *Scheduler) poll() {
	defer close(s.done)
	t := time.NewTicker(s.opts.Poll)
	defer t.Stop()
	for {
		select {
		case <-s.base.Done():
			return
		case <-t.C:
			if err := s.Sync(s.base); err != nil && s.base.Err() == nil {
				s.log.Warn().Err(err).Msg("reloading schedule triggers")
			}
		}
	}
}

// Stop stops polling and firing and waits for firings in progress (bounded by ctx).
func (s *Scheduler) Stop(ctx context.Context) error {
	s.mu.Lock()
	gs := s.gs
	if gs == nil {
		s.mu.Unlock()
		return nil
	}
	s.stop()
	s.mu.Unlock()
	<-s.done
	err := gs.ShutdownWithContext(ctx)
	if e, ok := s.opts.Elector.(*AdvisoryElector); ok {
		e.Release(ctx)
	}
	s.mu.Lock()
	s.gs = nil
	s.jobs = map[string]scheduledJob{}
	s.mu.Unlock()
	return err
}

// Sync makes the scheduled jobs match the enabled schedule triggers in the database: new
// ones are added, changed ones (a new revision) replaced, disabled and deleted ones removed.
// The handlers call it after each change, the poller every Poll.
func (s *Scheduler) Sync(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gs == nil {
		return nil
	}
	list, err := s.svc.schedules(ctx)
	if err != nil {
		return err
	}
	want := make(map[string]scheduled, len(list))
	for _, t := range list {
		want[t.ID] = t
	}
	for id, j := range s.jobs {
		if t, ok := want[id]; ok && t.Revision == j.rev {
			continue
		}
		if err := s.gs.RemoveJob(j.id); err != nil && !errors.Is(err, gocron.ErrJobNotFound) {
			return err
		}
		delete(s.jobs, id)
	}
	for id, t := range want {
		if _, ok := s.jobs[id]; ok {
			continue
		}
		j, err := s.gs.NewJob(
			gocron.CronJob(t.sched.crontab(), false),
			gocron.NewTask(s.fire, t),
			gocron.WithName(id),
			// No singleton mode: it drops a window whose predecessor's bookkeeping is not
			// finished yet. Overlapping firings are harmless, each claims its own window.
		)
		if err != nil {
			s.log.Warn().Str("trigger_id", id).Err(err).Msg("cannot schedule trigger")
			continue
		}
		s.jobs[id] = scheduledJob{rev: t.Revision, id: j.ID()}
	}
	return nil
}

// Scheduled returns the ids of the triggers with a job, for tests and diagnostics.
func (s *Scheduler) Scheduled() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.jobs))
	for id := range s.jobs {
		out = append(out, id)
	}
	return out
}

// fire runs on gocron's executor (only on the leader when an elector is set).
func (s *Scheduler) fire(t scheduled) {
	ctx := s.base
	now := s.opts.Clock.Now()
	w, ok := window(t.sched.spec, now, s.opts.Lookback)
	if !ok {
		s.log.Warn().Str("trigger_id", t.ID).Time("now", now).Msg("schedule firing too late for its window; skipped")
		return
	}
	claimed, err := s.svc.claim(ctx, t.ID, t.Revision, w)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error().Str("trigger_id", t.ID).Err(err).Msg("claiming a schedule window")
		}
		return
	}
	if !claimed {
		// Fired elsewhere, or the trigger was changed, disabled or deleted through another
		// replica since this one loaded it.
		s.log.Debug().Str("trigger_id", t.ID).Time("window", w).Msg("schedule window not claimed")
		return
	}
	runID, err := s.svc.runs.StartTriggeredRun(ctx, runRequest(t.row, t.sched.input()))
	if err != nil {
		// The window stays claimed: a schedule fires at most once per window.
		s.log.Error().Str("trigger_id", t.ID).Time("window", w).Err(err).Msg("schedule could not start its run")
		return
	}
	s.log.Info().Str("trigger_id", t.ID).Str("run_id", runID).Time("window", w).Msg("schedule started a run")
}
