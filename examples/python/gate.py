#!/usr/bin/env python3
"""A gate's side of idface: talks to `idface gateway` over HTTP/JSON.

The gateway runs on the gate's host, holds the member's key and speaks to
the cluster; this script is what gate software in any language does
(docs/openapi.json describes the operations).

    (umask 027; openssl rand -hex 32 > gate.token)
    idface gateway --cluster DIR --listen 127.0.0.1:8480 --token-file gate.token &
    export IDFACE_GATEWAY_TOKEN_FILE=gate.token
    python3 gate.py --url http://127.0.0.1:8480 health
    python3 gate.py --url http://127.0.0.1:8480 enroll --id alice --template alice.json
    python3 gate.py --url http://127.0.0.1:8480 identify --template probe.json
    python3 gate.py --url http://127.0.0.1:8480 count
    python3 gate.py --url http://127.0.0.1:8480 delete --id alice

A template file holds one JSON array of numbers (the face template, as many
as the cluster's dimension). Each command prints the gateway's JSON answer
and exits 0 on success, 1 when the gateway refused (its "error" says why).
An operator's gateway on TCP takes a bearer token (its --token-file): give
the same file with --token-file or IDFACE_GATEWAY_TOKEN_FILE.
"""
import argparse
import json
import os
import sys

import requests


def load_template(path):
    with open(path) as f:
        t = json.load(f)
    if not isinstance(t, list) or not all(isinstance(v, (int, float)) for v in t):
        sys.exit(f"{path}: want one JSON array of numbers")
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8480", help="the gateway's address")
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--token-file", default=os.environ.get("IDFACE_GATEWAY_TOKEN_FILE"),
                    help="the gateway's bearer token file (default: $IDFACE_GATEWAY_TOKEN_FILE)")
    sub = ap.add_subparsers(dest="op", required=True)
    sub.add_parser("health")
    sub.add_parser("count")
    p = sub.add_parser("identify")
    p.add_argument("--template", required=True)
    p = sub.add_parser("enroll")
    p.add_argument("--id", required=True)
    p.add_argument("--template", required=True)
    p = sub.add_parser("delete")
    p.add_argument("--id", required=True)
    a = ap.parse_args()

    headers = {}
    if a.token_file:
        with open(a.token_file) as f:
            headers["Authorization"] = "Bearer " + f.read().rstrip("\r\n")
    # json= sends Content-Type: application/json, which the gateway requires.
    if a.op in ("health", "count"):
        r = requests.get(f"{a.url}/v1/{a.op}", headers=headers, timeout=a.timeout)
    elif a.op == "identify":
        r = requests.post(f"{a.url}/v1/identify", json={"template": load_template(a.template)}, headers=headers, timeout=a.timeout)
    elif a.op == "enroll":
        r = requests.post(f"{a.url}/v1/enroll", json={"id": a.id, "template": load_template(a.template)}, headers=headers, timeout=a.timeout)
    else:
        r = requests.post(f"{a.url}/v1/delete", json={"id": a.id}, headers=headers, timeout=a.timeout)
    answer = r.json()
    print(json.dumps(answer, sort_keys=True))
    if r.status_code != 200:
        print(f"gateway refused ({r.status_code}): {answer.get('error', '')}", file=sys.stderr)
        return 1
    if a.op == "identify" and answer["decision"] == "accepted":
        print(f"open the gate for {answer['id']}" + (" (degraded answer)" if answer.get("degraded") else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
