package ui

import (
	"context"
	"path/filepath"
	"time"

	"github.com/plugsim/plugsim/harness/admin"
	"github.com/plugsim/plugsim/harness/collect"
	"github.com/plugsim/plugsim/harness/trace"
)

// AdminFeed follows a fake's admin socket (GET /trace?follow=1) from the moment it is first
// reached: what the ring held before is not replayed.
type AdminFeed struct {
	// FeedName names the feed in errors; Endpoint is the socket (unix://PATH); Node, when set,
	// names the fake's participants after their node (collect.OnNode).
	FeedName, Endpoint, Node string

	since   uint64
	started bool
}

// Name says which fake this is.
func (f *AdminFeed) Name() string { return f.FeedName }

// Follow streams the fake's events until ctx ends or the stream breaks.
func (f *AdminFeed) Follow(ctx context.Context, emit func(trace.Event)) error {
	c, err := admin.NewClient(f.Endpoint)
	if err != nil {
		return err
	}
	if !f.started {
		evs, err := c.Trace(0)
		if err != nil {
			return err
		}
		if len(evs) > 0 {
			f.since = evs[len(evs)-1].Seq
		}
		f.started = true
	}
	return c.Follow(ctx, f.since, func(ev trace.Event) {
		f.since = ev.Seq
		emit(collect.OnNode(ev, f.Node))
	})
}

// FileFeed follows a JSON-lines trace file (cni-fake's logFile, a cluster fake's --trace) from its
// end when the feed starts, reading what was appended every Poll; a file not written yet is empty.
type FileFeed struct {
	FeedName, Path, Node string
	// Poll is how often the file is read (0: 100ms).
	Poll time.Duration

	src collect.Source // kept across retries, so a retry goes on where the last read ended
}

// Name says which file this is.
func (f *FileFeed) Name() string { return f.FeedName }

// Follow reads the file's new lines until ctx ends.
func (f *FileFeed) Follow(ctx context.Context, emit func(trace.Event)) error {
	if f.src == nil {
		f.src = collect.File(f.FeedName, f.Path, false)
	}
	src := f.src
	every := f.Poll
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		evs, err := src.Next()
		for _, ev := range evs {
			emit(collect.OnNode(ev, f.Node))
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// clusterFeeds follows every trace file of a cluster's fakes, named as collect.ClusterTraceFiles
// names them.
func clusterFeeds(files map[string]string) []Feed {
	var feeds []Feed
	for path, node := range files {
		name := filepath.Base(path)
		if node != "" {
			name = node + "/" + name
		}
		feeds = append(feeds, &FileFeed{FeedName: name, Path: path, Node: node})
	}
	return feeds
}
