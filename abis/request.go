// Package abis puts an idface cluster behind MOSIP's ABIS API (MOSIP ABIS
// API 1.1: docs/ABIS.md): JSON requests read from an inbound queue of a
// message broker, answers written to an outbound queue, each request
// answered once from a durable journal keyed by requestId, biometric data
// fetched from the request's referenceURL as a CBEFF document whose face
// record a pluggable extractor turns into a template.
//
// # Security model
//
// The adapter is a client of the cluster (an operator: it enrolls and
// deletes); like every client it sees the templates it sends, and only
// while it sends them. It keeps none at rest: its journal holds requestIds,
// referenceIds, referenceURLs and the answers sent, so an identify by
// referenceId fetches the record's CBEFF again from MOSIP. The servers of
// the cluster see what every idface client gives them (SECURITY.md); MOSIP
// sees the answers (ids, never scores unless the cluster reveals them).
package abis

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/idface/idface/protocol"
)

// The request types (MOSIP ABIS API 1.1, "ABIS Operations").
const (
	OpInsert         = "mosip.abis.insert"
	OpIdentify       = "mosip.abis.identify"
	OpDelete         = "mosip.abis.delete"
	OpPing           = "mosip.abis.ping"
	OpPendingJobs    = "mosip.abis.pendingJobs"
	OpReferenceCount = "mosip.abis.referenceCount"
)

// Version is the API version the adapter speaks.
const Version = "1.1"

// Return values (MOSIP ABIS API, "Standard Return Codes").
const (
	ReturnSuccess = "1"
	ReturnFailed  = "2"
)

// Failure is a failureReason code of MOSIP's ABIS API ("Failure Reasons").
type Failure int

const (
	FailInternal         Failure = 1  // internal error - Unknown
	FailAborted          Failure = 2  // aborted
	FailUnexpected       Failure = 3  // unexpected error
	FailCannotServe      Failure = 4  // unable to serve the request - invalid request structure
	FailMissingRefID     Failure = 5  // missing referenceId (in request body)
	FailMissingRequestID Failure = 6  // missing requestId (in request body)
	FailFetch            Failure = 7  // unable to fetch biometric details (using referenceURL)
	FailMissingRefURL    Failure = 8  // missing reference URL (in request body)
	FailMissingTime      Failure = 9  // missing requesttime (in request body)
	FailRefIDExists      Failure = 10 // referenceId already exists (in ABIS)
	FailNoData           Failure = 11 // CBEFF has no data
	FailRefIDNotFound    Failure = 12 // referenceId not found (in ABIS)
	FailVersion          Failure = 13 // invalid version
	FailID               Failure = 14 // invalid id
	FailTimeFormat       Failure = 15 // invalid requesttime format
	FailCBEFF            Failure = 16 // invalid CBEFF format
	FailExpired          Failure = 17 // data share URL has expired
	FailQuality          Failure = 18 // Biometric Quality check failed
)

// Error is a refusal with the failure code MOSIP is answered with; Msg
// goes to the adapter's log only.
type Error struct {
	Code Failure
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("abis: failure %d: %s", e.Code, e.Msg) }

func fail(code Failure, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// CodeOf is the failure code of err: its *Error's, else FailInternal.
func CodeOf(err error) Failure {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return FailInternal
}

// Request is one request as MOSIP sends it. A referenceId or
// referenceURL that is absent and one that is null both read as nil.
type Request struct {
	ID           string  `json:"id"`
	Version      string  `json:"version"`
	RequestID    string  `json:"requestId"`
	RequestTime  string  `json:"requesttime"`
	ReferenceID  *string `json:"referenceId"`
	ReferenceURL *string `json:"referenceURL"` // also read as referenceUrl (the spec spells it both ways)
	Gallery      *struct {
		ReferenceIDs []struct {
			ReferenceID string `json:"referenceId"`
		} `json:"referenceIds"`
	} `json:"gallery"`
	Flags map[string]json.RawMessage `json:"flags"`

	// Set by Decode from Flags.
	MaxResults int // default DefaultMaxResults
	TargetFPIR int // 0: not asked
}

// DefaultMaxResults is maxResults when a request gives none.
const DefaultMaxResults = 10

// MaxBody bounds a request message (a gallery of 10^4 referenceIds fits).
const MaxBody = 1 << 20

// Decode reads one request and checks it as the spec says. A request
// whose id and requestId could be read is returned with the refusal, so
// that the answer carries them.
func Decode(body []byte) (*Request, *Error) {
	if len(body) > MaxBody {
		return &Request{}, fail(FailCannotServe, "request of %d bytes, limit %d", len(body), MaxBody)
	}
	var q Request
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&q); err != nil {
		// Read what can be read for the answer's id and requestId.
		var head struct {
			ID        any `json:"id"`
			RequestID any `json:"requestId"`
		}
		json.Unmarshal(body, &head)
		q = Request{}
		q.ID, _ = head.ID.(string)
		q.RequestID, _ = head.RequestID.(string)
		return &q, fail(FailCannotServe, "not a request object: %v", err)
	}
	if dec.More() {
		return &q, fail(FailCannotServe, "data after the request object")
	}
	return &q, q.check()
}

func (q *Request) check() *Error {
	switch q.ID {
	case OpInsert, OpIdentify, OpDelete, OpPing, OpPendingJobs, OpReferenceCount:
	default:
		return fail(FailID, "id %q is no ABIS request", q.ID)
	}
	if q.RequestID == "" {
		return fail(FailMissingRequestID, "no requestId")
	}
	if err := protocol.CheckStoredID(q.RequestID); err != nil {
		return fail(FailCannotServe, "requestId: %v", err)
	}
	if q.Version != Version {
		return fail(FailVersion, "version %q, want %q", q.Version, Version)
	}
	if q.RequestTime == "" {
		return fail(FailMissingTime, "no requesttime")
	}
	if _, err := time.Parse(time.RFC3339Nano, q.RequestTime); err != nil {
		return fail(FailTimeFormat, "requesttime %q is not ISO 8601 (2020-03-29T07:01:24.692Z)", q.RequestTime)
	}
	ref := q.Ref()
	url := q.URL()
	switch q.ID {
	case OpInsert:
		if ref == "" {
			return fail(FailMissingRefID, "insert without a referenceId")
		}
		if url == "" {
			return fail(FailMissingRefURL, "insert without a referenceURL")
		}
	case OpDelete:
		if ref == "" {
			return fail(FailMissingRefID, "delete without a referenceId")
		}
	case OpIdentify:
		if ref == "" && url == "" {
			return fail(FailMissingRefID, "identify with neither a referenceId nor a referenceURL")
		}
		if err := q.flags(); err != nil {
			return err
		}
		if q.Gallery != nil {
			for i, g := range q.Gallery.ReferenceIDs {
				if err := checkRef(g.ReferenceID); err != nil {
					return fail(FailCannotServe, "gallery.referenceIds[%d]: %v", i, err)
				}
			}
		}
	}
	if ref != "" {
		if err := checkRef(ref); err != nil {
			return fail(FailCannotServe, "referenceId: %v", err)
		}
	}
	return nil
}

func checkRef(ref string) error {
	if ref == "" {
		return errors.New("empty referenceId")
	}
	return protocol.CheckID(ref)
}

// Ref is the referenceId, "" when absent or null.
func (q *Request) Ref() string {
	if q.ReferenceID == nil {
		return ""
	}
	return *q.ReferenceID
}

// URL is the referenceURL, "" when absent, null or empty.
func (q *Request) URL() string {
	if q.ReferenceURL == nil {
		return ""
	}
	return strings.TrimSpace(*q.ReferenceURL)
}

// Change reports whether the request changes the gallery (served in the
// order received, before every later identify).
func (q *Request) Change() bool { return q.ID == OpInsert || q.ID == OpDelete }

// flags reads maxResults and targetFPIR, given as a number or a string
// of digits (the spec shows both); other flags are ignored, as the spec
// lets an ABIS.
func (q *Request) flags() *Error {
	q.MaxResults = DefaultMaxResults
	for k, v := range q.Flags {
		switch strings.ToLower(k) {
		case "maxresults":
			n, err := flagInt(v)
			if err != nil || n < 1 {
				return fail(FailCannotServe, "flags.maxResults %s: want a positive integer", v)
			}
			q.MaxResults = n
		case "targetfpir":
			n, err := flagInt(v)
			if err != nil || n < 1 || n > 200 {
				return fail(FailCannotServe, "flags.targetFPIR %s: want round(-10 log10 FPIR), a positive integer", v)
			}
			q.TargetFPIR = n
		}
	}
	return nil
}

func flagInt(v json.RawMessage) (int, error) {
	var s string
	if err := json.Unmarshal(v, &s); err == nil {
		return strconv.Atoi(strings.TrimSpace(s))
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return 0, err
	}
	if f != math.Trunc(f) || f > math.MaxInt32 || f < math.MinInt32 {
		return 0, errors.New("not an integer")
	}
	return int(f), nil
}

// FPIR is the false-positive identification rate targetFPIR stands for:
// targetFPIR = round(-10 log10 FPIR) (30 is 1 in 1,000).
func FPIR(target int) float64 { return math.Pow(10, -float64(target)/10) }

// TargetOf is targetFPIR for a rate.
func TargetOf(fpir float64) int { return int(math.Round(-10 * math.Log10(fpir))) }

// Response is one answer. returnValue, failureReason and the counts are
// strings, as the spec's parameter table and examples have them.
type Response struct {
	ID            string         `json:"id"`
	RequestID     string         `json:"requestId"`
	ResponseTime  string         `json:"responsetime"`
	ReturnValue   string         `json:"returnValue"`
	FailureReason string         `json:"failureReason,omitempty"`
	CandidateList *CandidateList `json:"candidateList,omitempty"`
	JobsCount     *string        `json:"jobscount,omitempty"`
	Count         *string        `json:"count,omitempty"`
}

// CandidateList is identify's answer.
type CandidateList struct {
	Count      string            `json:"count"`
	Candidates []Candidate       `json:"candidates"`
	Analytics  map[string]string `json:"analytics,omitempty"`
}

// Candidate is one id identify found. Its analytics carry its rank (1 is
// the best) and, in a cluster that reveals scores, the internal score.
type Candidate struct {
	ReferenceID string            `json:"referenceId"`
	Analytics   map[string]string `json:"analytics"`
}

// answer is the success or failure response to q at now.
func answer(q *Request, now time.Time, err error) *Response {
	r := &Response{ReturnValue: ReturnSuccess, ResponseTime: now.UTC().Format("2006-01-02T15:04:05.000Z")}
	if q != nil {
		r.ID, r.RequestID = q.ID, q.RequestID
	}
	if err != nil {
		r.ReturnValue = ReturnFailed
		r.FailureReason = strconv.Itoa(int(CodeOf(err)))
	}
	return r
}
