package main

import (
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/convo-dev/convo/limit"
	"github.com/convo-dev/convo/postgres"
)

// Limits bounds what one user, and the server, may hold at once. Each has
// an environment variable and a flag; 0 turns a bound off.
type Limits struct {
	// MaxStreamsPerUser bounds one user's open streams on this server,
	// every protocol together (CONVO_MAX_STREAMS_PER_USER,
	// --max-streams-per-user).
	MaxStreamsPerUser int
	// MaxStreams bounds this server's open streams in all
	// (CONVO_MAX_STREAMS, --max-streams).
	MaxStreams int
	// WriteRate is each user's sustained writes a second (CONVO_WRITE_RATE,
	// --write-rate), in bursts of up to WriteBurst (CONVO_WRITE_BURST,
	// --write-burst).
	WriteRate  float64
	WriteBurst int
	// MaxActivePrompts caps one user's queued and running prompts, across
	// every server of the database (CONVO_MAX_ACTIVE_PROMPTS,
	// --max-active-prompts). The server writes it into the database at
	// start, where convo.send_message enforces it.
	MaxActivePrompts int
	// SearchRate is each user's sustained searches a second
	// (CONVO_SEARCH_RATE, --search-rate), in bursts of up to SearchBurst
	// (CONVO_SEARCH_BURST, --search-burst); a rate of its own, not the
	// write rate (limit.NewSearches says why).
	SearchRate  float64
	SearchBurst int
	// MaxSearches bounds the searches this server runs at once
	// (CONVO_MAX_SEARCHES, --max-searches); a user runs at most
	// limit.MaxUserSearches at once.
	MaxSearches int
	// SearchTimeout bounds one search in the database
	// (CONVO_SEARCH_TIMEOUT, --search-timeout): its statement_timeout.
	SearchTimeout time.Duration
	// MaxReadsPerUser caps one user's whole-conversation reads running at
	// once on this server: GetConversation, ListMessages, the history
	// export and the AI SDK's messages, every protocol together, each
	// until its answer is written (CONVO_MAX_READS_PER_USER,
	// --max-reads-per-user).
	MaxReadsPerUser int
	// MaxPendingSends bounds the SendMessages this server holds waiting
	// to be written (CONVO_MAX_PENDING_SENDS, --max-pending-sends): past
	// it a send is refused at once, resource_exhausted (HTTP 503) with
	// Retry-After, writing nothing (postgres.Store.SetMaxPendingSends).
	MaxPendingSends int
}

// DefaultLimits are safe for a server on the internet and roomy for one
// person's use.
func DefaultLimits() Limits {
	return Limits{
		MaxStreamsPerUser: 64, MaxStreams: 5000, WriteRate: 2, WriteBurst: 20, MaxActivePrompts: 8,
		SearchRate: 2, SearchBurst: 20, MaxSearches: 4, SearchTimeout: 3 * time.Second, MaxReadsPerUser: 8,
		MaxPendingSends: postgres.DefaultMaxPendingSends,
	}
}

func (l *Limits) fromEnv(getenv func(string) string) error {
	for name, dst := range map[string]*int{
		"CONVO_MAX_STREAMS_PER_USER": &l.MaxStreamsPerUser, "CONVO_MAX_STREAMS": &l.MaxStreams,
		"CONVO_WRITE_BURST": &l.WriteBurst, "CONVO_MAX_ACTIVE_PROMPTS": &l.MaxActivePrompts,
		"CONVO_SEARCH_BURST": &l.SearchBurst, "CONVO_MAX_SEARCHES": &l.MaxSearches,
		"CONVO_MAX_READS_PER_USER": &l.MaxReadsPerUser, "CONVO_MAX_PENDING_SENDS": &l.MaxPendingSends,
	} {
		if v := getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("%s: %q is not a whole number of 0 or more", name, v)
			}
			*dst = n
		}
	}
	for name, dst := range map[string]*float64{"CONVO_WRITE_RATE": &l.WriteRate, "CONVO_SEARCH_RATE": &l.SearchRate} {
		if v := getenv(name); v != "" {
			r, err := strconv.ParseFloat(v, 64)
			if err != nil || r < 0 {
				return fmt.Errorf("%s: %q is not a number a second (0 or more)", name, v)
			}
			*dst = r
		}
	}
	if v := getenv("CONVO_SEARCH_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("CONVO_SEARCH_TIMEOUT: %q is not a duration such as 3s or 500ms", v)
		}
		l.SearchTimeout = d
	}
	return nil
}

func (l *Limits) registerFlags(fs *flag.FlagSet) {
	fs.IntVar(&l.MaxStreamsPerUser, "max-streams-per-user", l.MaxStreamsPerUser, "most streams one user may hold open on this server, every protocol together (CONVO_MAX_STREAMS_PER_USER); 0: no limit")
	fs.IntVar(&l.MaxStreams, "max-streams", l.MaxStreams, "most streams this server holds open in all (CONVO_MAX_STREAMS); 0: no limit")
	fs.Float64Var(&l.WriteRate, "write-rate", l.WriteRate, "writes a second each user may make on average: messages, renames, votes, feedback (CONVO_WRITE_RATE); 0: no limit")
	fs.IntVar(&l.WriteBurst, "write-burst", l.WriteBurst, "writes each user may make at once before --write-rate applies (CONVO_WRITE_BURST)")
	fs.Float64Var(&l.SearchRate, "search-rate", l.SearchRate, "searches a second each user may make on average (CONVO_SEARCH_RATE); 0: no limit")
	fs.IntVar(&l.SearchBurst, "search-burst", l.SearchBurst, "searches each user may make at once before --search-rate applies (CONVO_SEARCH_BURST)")
	fs.IntVar(&l.MaxSearches, "max-searches", l.MaxSearches, "most searches this server runs at once (CONVO_MAX_SEARCHES); 0: no limit")
	fs.DurationVar(&l.SearchTimeout, "search-timeout", l.SearchTimeout, "how long one search may run in the database (CONVO_SEARCH_TIMEOUT); 0: no limit")
	fs.IntVar(&l.MaxReadsPerUser, "max-reads-per-user", l.MaxReadsPerUser, "most whole-conversation reads (GetConversation, ListMessages, history, AI SDK messages) one user may have running at once on this server (CONVO_MAX_READS_PER_USER); 0: no limit")
	fs.IntVar(&l.MaxPendingSends, "max-pending-sends", l.MaxPendingSends, "most messages this server holds waiting to be written; past it a send is refused at once with resource_exhausted (HTTP 503) and Retry-After (CONVO_MAX_PENDING_SENDS); 0: no limit")
	fs.IntVar(&l.MaxActivePrompts, "max-active-prompts", l.MaxActivePrompts, "most prompts one user may have queued or running, across all servers of the database (CONVO_MAX_ACTIVE_PROMPTS); 0: no limit")
}

// check refuses limits out of range, naming each setting through name
// (settingNames.name: as the user gave it, variable or flag).
func (l *Limits) check(name func(flag string) string) error {
	for flag, n := range map[string]int{
		"max-streams-per-user": l.MaxStreamsPerUser, "max-streams": l.MaxStreams,
		"write-burst": l.WriteBurst, "max-active-prompts": l.MaxActivePrompts,
		"search-burst": l.SearchBurst, "max-searches": l.MaxSearches,
		"max-reads-per-user": l.MaxReadsPerUser, "max-pending-sends": l.MaxPendingSends,
	} {
		if n < 0 {
			return fmt.Errorf("%s: want 0 or more", name(flag))
		}
	}
	if l.WriteRate < 0 {
		return fmt.Errorf("%s: want 0 or more", name("write-rate"))
	}
	if l.WriteRate > 0 && l.WriteBurst < 1 {
		return fmt.Errorf("%s: want at least 1 while the write rate is above 0 (%s)", name("write-burst"), name("write-rate"))
	}
	if l.SearchRate < 0 {
		return fmt.Errorf("%s: want 0 or more", name("search-rate"))
	}
	if l.SearchRate > 0 && l.SearchBurst < 1 {
		return fmt.Errorf("%s: want at least 1 while the search rate is above 0 (%s)", name("search-burst"), name("search-rate"))
	}
	if l.SearchTimeout < 0 {
		return fmt.Errorf("%s: want 0 or more", name("search-timeout"))
	}
	return nil
}

// writes is the write limiter these limits ask for (nil: none).
func (l Limits) writes() *limit.Writes { return limit.NewWrites(l.WriteRate, l.WriteBurst) }

// searches is the search limiter these limits ask for (nil: none).
func (l Limits) searches() *limit.Searches {
	return limit.NewSearches(l.SearchRate, l.SearchBurst, l.MaxSearches)
}

// reads is the read cap these limits ask for (nil: none).
func (l Limits) reads() *limit.Reads { return limit.NewReads(l.MaxReadsPerUser) }
