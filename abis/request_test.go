package abis

import (
	"fmt"
	"strings"
	"testing"
)

func TestDecodeFailures(t *testing.T) {
	const ok = `"version":"1.1","requestId":"r1","requesttime":"2020-03-29T07:01:24.692Z"`
	for _, c := range []struct {
		name, body string
		want       Failure // 0: accepted
	}{
		{"ping", `{"id":"mosip.abis.ping",` + ok + `}`, 0},
		{"pendingJobs", `{"id":"mosip.abis.pendingJobs",` + ok + `}`, 0},
		{"referenceCount", `{"id":"mosip.abis.referenceCount",` + ok + `}`, 0},
		{"insert", `{"id":"mosip.abis.insert",` + ok + `,"referenceId":"a","referenceURL":"https://x/y"}`, 0},
		{"insert/referenceUrl spelling", `{"id":"mosip.abis.insert",` + ok + `,"referenceId":"a","referenceUrl":"https://x/y"}`, 0},
		{"identify/by referenceId", `{"id":"mosip.abis.identify",` + ok + `,"referenceId":"a","referenceURL":""}`, 0},
		{"identify/by URL", `{"id":"mosip.abis.identify",` + ok + `,"referenceId":null,"referenceURL":"https://x/y"}`, 0},
		{"identify/flags as numbers", `{"id":"mosip.abis.identify",` + ok + `,"referenceId":"a","flags":{"maxResults":3,"targetFPIR":30,"flag1":"v"}}`, 0},
		{"identify/gallery", `{"id":"mosip.abis.identify",` + ok + `,"referenceId":"a","gallery":{"referenceIds":[{"referenceId":"b"}]}}`, 0},
		{"not JSON", `{"id":`, FailCannotServe},
		{"trailing data", `{"id":"mosip.abis.ping",` + ok + `} {}`, FailCannotServe},
		{"a number for a string", `{"id":"mosip.abis.ping","version":1.1,"requestId":"r1","requesttime":"2020-03-29T07:01:24.692Z"}`, FailCannotServe},
		{"unknown id", `{"id":"mosip.abis.frob",` + ok + `}`, FailID},
		{"no id", `{` + ok + `}`, FailID},
		{"no requestId", `{"id":"mosip.abis.ping","version":"1.1","requesttime":"2020-03-29T07:01:24.692Z"}`, FailMissingRequestID},
		{"bad version", `{"id":"mosip.abis.ping","version":"1.0","requestId":"r1","requesttime":"2020-03-29T07:01:24.692Z"}`, FailVersion},
		{"no requesttime", `{"id":"mosip.abis.ping","version":"1.1","requestId":"r1"}`, FailMissingTime},
		{"bad requesttime", `{"id":"mosip.abis.ping","version":"1.1","requestId":"r1","requesttime":"29/03/2020"}`, FailTimeFormat},
		{"insert/no referenceId", `{"id":"mosip.abis.insert",` + ok + `,"referenceURL":"https://x/y"}`, FailMissingRefID},
		{"insert/null referenceId", `{"id":"mosip.abis.insert",` + ok + `,"referenceId":null,"referenceURL":"https://x/y"}`, FailMissingRefID},
		{"insert/no referenceURL", `{"id":"mosip.abis.insert",` + ok + `,"referenceId":"a"}`, FailMissingRefURL},
		{"insert/empty referenceURL", `{"id":"mosip.abis.insert",` + ok + `,"referenceId":"a","referenceURL":" "}`, FailMissingRefURL},
		{"insert/control character", `{"id":"mosip.abis.insert",` + ok + `,"referenceId":"a\u0007","referenceURL":"https://x/y"}`, FailCannotServe},
		{"delete/no referenceId", `{"id":"mosip.abis.delete",` + ok + `}`, FailMissingRefID},
		{"identify/neither", `{"id":"mosip.abis.identify",` + ok + `,"referenceId":null,"referenceURL":""}`, FailMissingRefID},
		{"identify/maxResults 0", `{"id":"mosip.abis.identify",` + ok + `,"referenceId":"a","flags":{"maxResults":"0"}}`, FailCannotServe},
		{"identify/maxResults text", `{"id":"mosip.abis.identify",` + ok + `,"referenceId":"a","flags":{"maxResults":"ten"}}`, FailCannotServe},
		{"identify/targetFPIR fraction", `{"id":"mosip.abis.identify",` + ok + `,"referenceId":"a","flags":{"targetFPIR":30.5}}`, FailCannotServe},
		{"identify/empty gallery id", `{"id":"mosip.abis.identify",` + ok + `,"referenceId":"a","gallery":{"referenceIds":[{"referenceId":""}]}}`, FailCannotServe},
		{"too large", `{"id":"mosip.abis.ping",` + ok + `,"x":"` + strings.Repeat("a", MaxBody) + `"}`, FailCannotServe},
	} {
		t.Run(c.name, func(t *testing.T) {
			q, err := Decode([]byte(c.body))
			if q == nil {
				t.Fatal("no request returned")
			}
			var got Failure
			if err != nil {
				got = err.Code
			}
			if got != c.want {
				t.Fatalf("failure %d (%v), want %d", got, err, c.want)
			}
		})
	}
}

func TestDecodeFlags(t *testing.T) {
	q, err := Decode([]byte(`{"id":"mosip.abis.identify","version":"1.1","requestId":"r","requesttime":"2020-03-29T07:01:24Z","referenceId":"a","flags":{"maxResults":"3","targetFPIR":"40"}}`))
	if err != nil || q.MaxResults != 3 || q.TargetFPIR != 40 {
		t.Fatalf("%+v %v", q, err)
	}
	q, err = Decode([]byte(`{"id":"mosip.abis.identify","version":"1.1","requestId":"r","requesttime":"2020-03-29T07:01:24Z","referenceId":"a"}`))
	if err != nil || q.MaxResults != DefaultMaxResults || q.TargetFPIR != 0 {
		t.Fatalf("defaults: %+v %v", q, err)
	}
}

func TestTargetFPIR(t *testing.T) {
	for target, fpir := range map[int]float64{30: 1e-3, 40: 1e-4, 50: 1e-5} {
		if got := TargetOf(fpir); got != target {
			t.Errorf("TargetOf(%g) = %d, want %d", fpir, got, target)
		}
		if got := FPIR(target); fmt.Sprintf("%.6g", got) != fmt.Sprintf("%.6g", fpir) {
			t.Errorf("FPIR(%d) = %g, want %g", target, got, fpir)
		}
	}
}

func TestCheckResponse(t *testing.T) {
	for _, c := range []struct {
		op, body string
		ok       bool
	}{
		{OpInsert, `{"id":"mosip.abis.insert","requestId":"r","responsetime":"2020-03-29T07:01:24.692Z","returnValue":"1"}`, true},
		{OpInsert, `{"id":"mosip.abis.insert","requestId":"r","responsetime":"2020-03-29T07:01:24.692Z","returnValue":"2","failureReason":"7"}`, true},
		{OpInsert, `{"id":"mosip.abis.insert","requestId":"r","responsetime":"2020-03-29T07:01:24.692Z","returnValue":2,"failureReason":7}`, false},
		{OpInsert, `{"id":"mosip.abis.insert","requestId":"r","responsetime":"2020-03-29T07:01:24.692Z","returnValue":"2","failureReason":"19"}`, false},
		{OpInsert, `{"id":"mosip.abis.insert","requestId":"r","responsetime":"2020-03-29T07:01:24.692Z","returnValue":"2"}`, false},
		{OpInsert, `{"id":"mosip.abis.insert","requestId":"r","responsetime":"now","returnValue":"1"}`, false},
		{OpPendingJobs, `{"id":"mosip.abis.pendingJobs","requestId":"r","responsetime":"2020-03-29T07:01:24.692Z","returnValue":"1","jobscount":"3"}`, true},
		{OpPendingJobs, `{"id":"mosip.abis.pendingJobs","requestId":"r","responsetime":"2020-03-29T07:01:24.692Z","returnValue":"1"}`, false},
		{OpReferenceCount, `{"id":"mosip.abis.referenceCount","requestId":"r","responsetime":"2020-03-29T07:01:24.692Z","returnValue":"1","count":"12"}`, true},
		{OpIdentify, `{"id":"mosip.abis.identify","requestId":"r","responsetime":"2020-03-29T07:01:24.692Z","returnValue":"1","candidateList":{"count":"1","candidates":[{"referenceId":"a","analytics":{"rank":"1"}}]}}`, true},
		{OpIdentify, `{"id":"mosip.abis.identify","requestId":"r","responsetime":"2020-03-29T07:01:24.692Z","returnValue":"1","candidateList":{"count":"2","candidates":[{"referenceId":"a","analytics":{}}]}}`, false},
		{OpIdentify, `{"id":"mosip.abis.identify","requestId":"r","responsetime":"2020-03-29T07:01:24.692Z","returnValue":"1"}`, false},
		{OpIdentify, `{"id":"mosip.abis.identify","requestId":"r","responsetime":"2020-03-29T07:01:24.692Z","returnValue":"1","candidateList":{"count":"0","candidates":[]},"extra":"1"}`, false},
	} {
		if err := CheckResponse([]byte(c.body), c.op); (err == nil) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.body, err, c.ok)
		}
	}
}
