package abis

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// CheckResponse checks an answer against the response shapes of MOSIP's
// ABIS API 1.1 (docs/ABIS.md "Responses"; re-derived from the
// specification, whose examples the testing kit's older schemas do not
// all follow): the fields each request type's answer has and no other,
// every value a string, returnValue "1" or "2", failureReason 1 to 18
// exactly when it failed, a candidateList exactly in identify's success.
func CheckResponse(body []byte, op string) error {
	var r map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&r); err != nil {
		return fmt.Errorf("not a JSON object: %v", err)
	}
	str := func(k string) (string, error) {
		v, ok := r[k]
		if !ok {
			return "", fmt.Errorf("no %s", k)
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", fmt.Errorf("%s is %s, not a string", k, v)
		}
		return s, nil
	}
	allowed := map[string]bool{"id": true, "requestId": true, "responsetime": true, "returnValue": true, "failureReason": true}
	for _, k := range []string{"id", "requestId", "responsetime", "returnValue"} {
		if _, err := str(k); err != nil {
			return err
		}
	}
	if id, _ := str("id"); id != op {
		return fmt.Errorf("id %q, want %q", id, op)
	}
	t, _ := str("responsetime")
	if _, err := time.Parse(time.RFC3339Nano, t); err != nil {
		return fmt.Errorf("responsetime %q is not ISO 8601", t)
	}
	rv, _ := str("returnValue")
	switch rv {
	case ReturnSuccess:
		if _, ok := r["failureReason"]; ok {
			return fmt.Errorf("a success with a failureReason")
		}
	case ReturnFailed:
		fr, err := str("failureReason")
		if err != nil {
			return err
		}
		if n, err := strconv.Atoi(fr); err != nil || n < 1 || n > 18 || strconv.Itoa(n) != fr {
			return fmt.Errorf("failureReason %q is not one of 1 to 18", fr)
		}
	default:
		return fmt.Errorf("returnValue %q, want \"1\" or \"2\"", rv)
	}
	digits := regexp.MustCompile(`^[0-9]+$`)
	switch op {
	case OpPendingJobs:
		allowed["jobscount"] = true
		if rv == ReturnSuccess {
			if n, err := str("jobscount"); err != nil || !digits.MatchString(n) {
				return fmt.Errorf("pendingJobs: jobscount %q %v", n, err)
			}
		}
	case OpReferenceCount:
		allowed["count"] = true
		if rv == ReturnSuccess {
			if n, err := str("count"); err != nil || !digits.MatchString(n) {
				return fmt.Errorf("referenceCount: count %q %v", n, err)
			}
		}
	case OpIdentify:
		allowed["candidateList"] = true
		_, has := r["candidateList"]
		if rv == ReturnFailed {
			if has {
				return fmt.Errorf("a failed identify with a candidateList")
			}
			break
		}
		if !has {
			return fmt.Errorf("identify: no candidateList")
		}
		if err := checkCandidates(r["candidateList"]); err != nil {
			return fmt.Errorf("identify: candidateList: %v", err)
		}
	}
	for k := range r {
		if !allowed[k] {
			return fmt.Errorf("field %q is not in %s's answer", k, op)
		}
	}
	return nil
}

func checkCandidates(raw json.RawMessage) error {
	var cl struct {
		Count      *string            `json:"count"`
		Candidates *[]json.RawMessage `json:"candidates"`
		Analytics  map[string]any     `json:"analytics"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cl); err != nil {
		return err
	}
	if cl.Count == nil || cl.Candidates == nil {
		return fmt.Errorf("count and candidates are required")
	}
	if *cl.Count != strconv.Itoa(len(*cl.Candidates)) {
		return fmt.Errorf("count %q for %d candidates", *cl.Count, len(*cl.Candidates))
	}
	seen := map[string]bool{}
	for i, c := range *cl.Candidates {
		var cand struct {
			ReferenceID *string        `json:"referenceId"`
			Analytics   map[string]any `json:"analytics"`
			Modalities  []struct {
				BiometricType string         `json:"biometricType"`
				Analytics     map[string]any `json:"analytics"`
			} `json:"modalities"`
		}
		dec := json.NewDecoder(bytes.NewReader(c))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cand); err != nil {
			return fmt.Errorf("candidates[%d]: %v", i, err)
		}
		if cand.ReferenceID == nil || *cand.ReferenceID == "" {
			return fmt.Errorf("candidates[%d]: no referenceId", i)
		}
		if seen[*cand.ReferenceID] {
			return fmt.Errorf("candidates[%d]: %s twice", i, *cand.ReferenceID)
		}
		seen[*cand.ReferenceID] = true
	}
	return nil
}
