package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/idface/idface/protocol"
)

// defaultPage is GET /v1/ids's limit when none is given (idface ids').
const defaultPage = 1000

// ids lists the enrolled ids, a page at a time (client.IDs): in byte
// order, at most limit after after, and whether more follow.
func (g *gateway) ids(w http.ResponseWriter, r *http.Request) {
	q, ok := params(w, r, "after", "limit")
	if !ok {
		return
	}
	limit := defaultPage
	if s, given := q["limit"]; given {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > protocol.MaxListIDs {
			fail(w, http.StatusBadRequest, fmt.Sprintf("limit=%q: give a number of ids from 1 to %d", s, protocol.MaxListIDs))
			return
		}
		limit = n
	}
	after := q["after"]
	if after != "" {
		if err := protocol.CheckStoredID(after); err != nil {
			fail(w, http.StatusBadRequest, fmt.Sprintf("after: %v", err))
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.o.Timeout)
	defer cancel()
	ids, more, err := g.c.IDs(ctx, after, limit)
	if err != nil {
		g.failed(w, "ids", err)
		return
	}
	out := map[string]any{"ids": ids, "more": more}
	if ids == nil {
		out["ids"] = []string{}
	}
	if more {
		out["after"] = ids[len(ids)-1]
	}
	reply(w, http.StatusOK, out)
}

// exists says whether one id is enrolled (client.Exists).
func (g *gateway) exists(w http.ResponseWriter, r *http.Request) {
	q, ok := params(w, r, "id")
	if !ok {
		return
	}
	id, given := q["id"]
	if !given {
		fail(w, http.StatusBadRequest, "give the id to look for: GET /v1/exists?id=ID (URL-encoded)")
		return
	}
	// An id enrolled before ids had to be NFC may still be asked about.
	if err := protocol.CheckStoredID(id); err != nil {
		fail(w, http.StatusBadRequest, fmt.Sprintf("id: %v", err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.o.Timeout)
	defer cancel()
	enrolled, err := g.c.Exists(ctx, id)
	if err != nil {
		g.failed(w, "exists", err)
		return
	}
	reply(w, http.StatusOK, map[string]any{"id": id, "enrolled": enrolled})
}

// params reads a GET's query as strictly as a POST's body: only the
// names allowed, each at most once, in their case, and nothing that is
// not a well-formed query. A refusal names the parameter.
func params(w http.ResponseWriter, r *http.Request, allowed ...string) (map[string]string, bool) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		fail(w, http.StatusBadRequest, fmt.Sprintf("the query is not a URL query: %v", err))
		return nil, false
	}
	out := map[string]string{}
	for name, vs := range q {
		switch {
		case !slices.Contains(allowed, name):
			fail(w, http.StatusBadRequest, fmt.Sprintf("unknown parameter %q: %s takes %s", name, r.URL.Path, strings.Join(allowed, ", ")))
			return nil, false
		case len(vs) > 1:
			fail(w, http.StatusBadRequest, fmt.Sprintf("parameter %q given %d times", name, len(vs)))
			return nil, false
		}
		out[name] = vs[0]
	}
	return out, true
}
