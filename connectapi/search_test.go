package connectapi_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/convo-dev/convo/auth"
	convov1 "github.com/convo-dev/convo/gen/convo/v1"
	"github.com/convo-dev/convo/limit"
)

// searchOutcome is what a hostile query may get: results (want is their
// number, -1 for any) or InvalidArgument.
type searchOutcome struct {
	want    int
	invalid bool
}

var (
	anyResults = searchOutcome{want: -1}
	refused    = searchOutcome{invalid: true}
)

func found(n int) searchOutcome { return searchOutcome{want: n} }

// TestSearchHostileQueries sends queries built to break PostgreSQL's
// tsquery parser (runs of operators that nest deeper than its stack of 32,
// thousands of dashes, a thousand terms, very long words, NUL, lone
// punctuation, queries with nothing left to search), then hundreds of
// random ones. Each must answer results or InvalidArgument naming the
// field, never Internal; the well-formed ones find what they should.
func TestSearchHostileQueries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t)
	tb.send(t, tb.client, "", "Sourdough bread: feed the starter, then bake")
	tb.send(t, tb.client, "", "C++ and e-mail to a.b@example.com about the café in 東京")

	words := func(n int) string {
		w := make([]string, n)
		for i := range w {
			w[i] = "w" + strconv.Itoa(i)
		}
		return strings.Join(w, " ")
	}
	cases := map[string]struct {
		query string
		want  searchOutcome
	}{
		"33Dashes":             {strings.Repeat("-", 33), found(0)},
		"33DashesThenWord":     {strings.Repeat("-", 33) + "sourdough", refused}, // only excluded
		"WordThen33Dashes":     {"sourdough " + strings.Repeat("-", 33), found(1)},
		"SpacedDashes":         {"sourdough " + strings.Repeat("- ", 40) + "zebra", found(1)},
		"490Dashes":            {"bread " + strings.Repeat("-", 490), found(1)},
		"10000Dashes":          {strings.Repeat("-", 10_000), refused},
		"AngleDashChain":       {"bread " + strings.Repeat("<-", 100) + "zebra", found(1)},
		"Bangs":                {"!!!!", found(0)},
		"Operators":            {"&|<->", found(0)},
		"OperatorSoup":         {strings.Repeat("!&|()<>:*-", 40), found(0)},
		"ParensAround":         {strings.Repeat("(", 200) + "sourdough" + strings.Repeat(")", 200), found(1)},
		"QuoteOnly":            {`"`, found(0)},
		"EmptyQuotes":          {strings.Repeat(`""`, 100), found(0)},
		"UnclosedQuote":        {`"sourdough bread`, found(1)},
		"Phrase":               {`"sourdough bread"`, found(1)},
		"PhraseWrongOrder":     {`"bread sourdough"`, found(0)},
		"ExcludedPhrase":       {`bread -"feed the starter"`, found(0)},
		"QuotedDashes":         {`"` + strings.Repeat("-", 300) + `"`, found(0)},
		"NotQuoteChain":        {strings.Repeat(`-"`, 200), found(0)},
		"Or":                   {"zebra or sourdough", found(1)},
		"OrChain":              {strings.Repeat("or ", 160), found(0)},
		"OrEverywhere":         {"or sourdough or or café or", found(2)},
		"Excluded":             {"bread -zebra", found(1)},
		"OnlyExcluded":         {"-sourdough", refused},
		"OrExcluded":           {"zebra or -sourdough", refused},
		"StopWordsOnly":        {"the and of", found(0)},
		"StopWordAndExcluded":  {"the -sourdough", refused},
		"Whitespace":           {" \t\n ", found(0)},
		"Empty":                {"", refused},
		"NUL":                  {"sour\x00dough", refused},
		"Email":                {"a.b@example.com", found(1)},
		"Hyphenated":           {"e-mail", found(1)},
		"Unicode":              {"東京 café", found(1)},
		"Emoji":                {"🍞🍞🍞 🥖", found(0)},
		"LongWord":             {strings.Repeat("a", 500), found(0)},
		"LongAccentedWord":     {strings.Repeat("é", 500), found(0)},
		"LongFourByteWord":     {strings.Repeat("𝔸", 500), found(0)},
		"TooLong":              {strings.Repeat("a", 501), refused},
		"Backslashes":          {`\\ \' '' \"sourdough\"`, anyResults},
		"TsqueryWeights":       {"sourdough:* bread:AB", anyResults},
		"32Terms":              {words(31) + " sourdough", found(0)},
		"33Terms":              {words(33), refused},
		"1000Terms":            {strings.Repeat("x ", 1000), refused},
		"250TermsWithinLength": {strings.Repeat("x ", 250), refused},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res, err := tb.client.SearchMessages(ctx, connect.NewRequest(&convov1.SearchMessagesRequest{Query: c.query}))
			if c.want.invalid {
				ce := requireCode(t, err, connect.CodeInvalidArgument)
				if !strings.HasPrefix(ce.Message(), "query: ") {
					t.Errorf("message %q does not name the field query", ce.Message())
				}
				return
			}
			if err != nil {
				t.Fatalf("%.80q: %v", c.query, err)
			}
			if n := len(res.Msg.Results); c.want.want >= 0 && n != c.want.want {
				t.Errorf("%.80q found %d messages; want %d", c.query, n, c.want.want)
			}
		})
	}

	t.Run("Random", func(t *testing.T) {
		t.Parallel()
		pieces := []string{
			"-", "-", "--", "!", "&", "|", "<", "<->", "<2>", "(", ")", `"`, `"`, " ", " ", "\t", "or", "OR", "and",
			"sourdough", "bread", "the", ":*", ":A", "'", `\`, "é", "東京", "🍞", "x", "e-mail", "a.b@example.com", "#", "*",
		}
		rng := rand.New(rand.NewPCG(7, 7))
		searched := 0
		for i := range 400 {
			var q strings.Builder
			for range 1 + rng.IntN(120) {
				q.WriteString(pieces[rng.IntN(len(pieces))])
			}
			query := string([]rune(q.String())[:min(500, len([]rune(q.String())))])
			_, err := tb.client.SearchMessages(ctx, connect.NewRequest(&convov1.SearchMessagesRequest{Query: query}))
			var ce *connect.Error
			if err != nil && (!errors.As(err, &ce) || ce.Code() != connect.CodeInvalidArgument) {
				t.Fatalf("random query %d %q: %v", i, query, err)
			}
			if err == nil {
				searched++
			}
		}
		// Most must reach the database, or the test no longer tries its
		// parser.
		if searched < 200 {
			t.Errorf("only %d of 400 random queries were searched, the others refused", searched)
		}
		t.Logf("%d of 400 random queries searched, the others refused", searched)
	})
}

// TestSearchTimeout checks that a search the statement timeout stops is
// DeadlineExceeded with a message that says so, not Internal, and that
// the next search works. A transaction holding convo.blocks locked makes
// the search wait for as long as it needs.
func TestSearchTimeout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t, setupOptions{searchTimeout: 200 * time.Millisecond})
	tb.send(t, tb.client, "", "sourdough bread")

	tx, err := tb.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE convo.blocks IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	// The client waits longer than the server should.
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	_, err = tb.client.SearchMessages(waitCtx, connect.NewRequest(&convov1.SearchMessagesRequest{Query: "sourdough"}))
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	ce := requireCode(t, err, connect.CodeDeadlineExceeded)
	if !strings.Contains(ce.Message(), "search ran longer than 200ms") {
		t.Errorf("message %q does not say the search timed out", ce.Message())
	}
	res, err := tb.client.SearchMessages(ctx, connect.NewRequest(&convov1.SearchMessagesRequest{Query: "sourdough"}))
	if err != nil || len(res.Msg.Results) != 1 {
		t.Fatalf("search after the lock = %v, %v", res, err)
	}
}

// TestSearchRate checks the per-user search rate: a burst, then
// ResourceExhausted with Retry-After, every call counting; other users
// have their own.
func TestSearchRate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	tb := setup(t, setupOptions{verifier: auth.NewHS256(testSecret), searches: limit.NewSearches(0.001, 3, 0)})
	alice, bob := tb.clientAs(tokenFor(t, "alice")), tb.clientAs(tokenFor(t, "bob"))
	search := func(c interface {
		SearchMessages(context.Context, *connect.Request[convov1.SearchMessagesRequest]) (*connect.Response[convov1.SearchMessagesResponse], error)
	}, query string) error {
		_, err := c.SearchMessages(ctx, connect.NewRequest(&convov1.SearchMessagesRequest{Query: query}))
		return err
	}
	if err := search(alice, "sourdough"); err != nil {
		t.Fatal(err)
	}
	requireCode(t, search(alice, "-sourdough"), connect.CodeInvalidArgument) // a refused query counts too
	if err := search(alice, "bread"); err != nil {
		t.Fatal(err)
	}
	ce := requireCode(t, search(alice, "sourdough"), connect.CodeResourceExhausted)
	if !strings.Contains(ce.Message(), "search rate limit") {
		t.Errorf("message %q does not name the search rate limit", ce.Message())
	}
	if s, err := strconv.Atoi(ce.Meta().Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q; want whole seconds", ce.Meta().Get("Retry-After"))
	}
	if err := search(bob, "sourdough"); err != nil {
		t.Errorf("bob refused because of alice: %v", err)
	}
}
