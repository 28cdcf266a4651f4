package abis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Fetcher gets CBEFF documents from referenceURLs: HTTPS with the
// system's certificate verification (plain HTTP only when AllowHTTP),
// a timeout, a size bound, and MOSIP's JWT as the Authorization cookie
// where a token file is given.
type Fetcher struct {
	Client    *http.Client  // default: one with Timeout and no redirect to another scheme
	Timeout   time.Duration // one fetch (default 30 s)
	MaxBytes  int64         // default MaxCBEFF
	AllowHTTP bool          // accept http:// referenceURLs (tests, a broker on one host)
	// TokenFile, when set, holds the JWT MOSIP's auth manager issued; it
	// is read at every fetch (a token refresher may replace it) and sent
	// as the cookie Authorization=TOKEN.
	TokenFile string
	// Keys, when set, open MOSIP's encrypted data shares: every document
	// must then be one (datashare.go), as the partner's policy says.
	Keys *DataShareKeys
}

// Fetch returns the document at u. Failures carry the spec's codes:
// FailFetch when it cannot be fetched (an unreachable host, an HTTP
// error, a document over the bound), FailExpired when MOSIP's data share
// says it has expired, FailNoData when it is empty.
func (f *Fetcher) Fetch(ctx context.Context, u string) ([]byte, error) {
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" {
		return nil, fail(FailFetch, "referenceURL %q is not a URL", u)
	}
	switch {
	case pu.Scheme == "https":
	case pu.Scheme == "http" && f.AllowHTTP:
	default:
		return nil, fail(FailFetch, "referenceURL scheme %q refused (https only unless --allow-http)", pu.Scheme)
	}
	to := f.Timeout
	if to <= 0 {
		to = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, to)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fail(FailFetch, "referenceURL: %v", err)
	}
	if f.TokenFile != "" {
		tok, err := os.ReadFile(f.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("abis: token file: %w", err)
		}
		req.AddCookie(&http.Cookie{Name: "Authorization", Value: strings.TrimSpace(string(tok))})
	}
	c := f.Client
	if c == nil {
		c = &http.Client{CheckRedirect: func(r *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("too many redirects")
			}
			if r.URL.Scheme != "https" && !(f.AllowHTTP && r.URL.Scheme == "http") {
				return fmt.Errorf("redirect to %s refused", r.URL.Scheme)
			}
			return nil
		}}
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, fail(FailFetch, "fetching the referenceURL: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fail(FailFetch, "fetching the referenceURL: HTTP %s", resp.Status)
	}
	limit := f.MaxBytes
	if limit <= 0 {
		limit = MaxCBEFF
	}
	doc := limit
	if f.Keys != nil {
		limit = limit/3*4 + 8192 // base64 of the document and its envelope
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, fail(FailFetch, "reading the referenceURL: %v", err)
	}
	if int64(len(b)) > limit {
		return nil, fail(FailFetch, "the referenceURL's document is over %d bytes", limit)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, fail(FailNoData, "the referenceURL's document is empty")
	}
	if err := dataShareError(b); err != nil {
		return nil, err
	}
	if f.Keys != nil {
		if b, err = f.Keys.Open(b); err != nil {
			return nil, err
		}
		if int64(len(b)) > doc {
			return nil, fail(FailFetch, "the referenceURL's data share holds a document over %d bytes", doc)
		}
		if len(bytes.TrimSpace(b)) == 0 {
			return nil, fail(FailNoData, "the referenceURL's data share holds an empty document")
		}
	}
	return b, nil
}

// dataShareError reads MOSIP's answer to a data-share request that
// failed: HTTP 200 with a JSON body of errors (DAT-SER-006 "Data share
// usage expired", KER-ATH-401 ...).
func dataShareError(b []byte) error {
	t := bytes.TrimSpace(b)
	if len(t) == 0 || t[0] != '{' {
		return nil
	}
	var e struct {
		Errors []struct {
			ErrorCode string `json:"errorCode"`
			Message   string `json:"message"`
		} `json:"errors"`
	}
	if json.Unmarshal(t, &e) != nil || len(e.Errors) == 0 {
		return fail(FailCBEFF, "the referenceURL's document is JSON, not CBEFF XML")
	}
	first := e.Errors[0]
	if strings.Contains(strings.ToLower(first.Message), "expired") {
		return fail(FailExpired, "data share: %s %s", first.ErrorCode, first.Message)
	}
	return fail(FailFetch, "data share: %s %s", first.ErrorCode, first.Message)
}
