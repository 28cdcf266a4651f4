#!/usr/bin/env python3
"""A gate's side of idface: talks to `idface gateway` over HTTP/JSON.

The gateway runs on the gate's host, holds the member's key and speaks to
the cluster; this script is what gate software in any language does
(docs/openapi.json describes the operations). Python 3's standard library
only: nothing to install.

On the Unix socket the docs recommend (its mode 0660 decides who reaches
it; give --url unix:PATH, as the gateway's --listen):

    idface gateway --config cluster.json --home /etc/idface --listen unix:/run/idface/gate.sock &
    python3 gate.py --url unix:/run/idface/gate.sock identify --template probe.json

On loopback TCP (an operator's gateway there needs a bearer token):

    (umask 027; openssl rand -hex 32 > gate.token)
    idface gateway --cluster DIR --listen 127.0.0.1:8480 --token-file gate.token &
    export IDFACE_GATEWAY_TOKEN_FILE=gate.token
    python3 gate.py --url http://127.0.0.1:8480 health
    python3 gate.py --url http://127.0.0.1:8480 enroll --id alice --template alice.json
    python3 gate.py --url http://127.0.0.1:8480 identify --template probe.json
    python3 gate.py --url http://127.0.0.1:8480 count
    python3 gate.py --url http://127.0.0.1:8480 exists --id alice
    python3 gate.py --url http://127.0.0.1:8480 ids --all
    python3 gate.py --url http://127.0.0.1:8480 delete --id alice

A template file holds one JSON array of numbers (the face template, as many
as the cluster's dimension). Each command prints the gateway's JSON answer
and exits 0 on success, 1 when the gateway refused (its "error" says why)
or cannot be reached. A gateway with a bearer token (its --token-file)
takes the same file with --token-file or IDFACE_GATEWAY_TOKEN_FILE.
"""
import argparse
import http.client
import json
import os
import socket
import sys
import urllib.parse


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket: http.client with the socket's connect
    (urllib and requests speak TCP only)."""

    def __init__(self, path, timeout):
        # The Host header says "localhost"; a gateway on a Unix socket
        # does not check it.
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.socket_path)
        except OSError:
            s.close()
            raise
        self.sock = s


def connection(url, timeout):
    """The connection for --url and the path prefix of its operations."""
    if url.startswith("unix:"):
        path = url[len("unix:"):]
        if not path:
            sys.exit("--url unix: needs the socket's path, as the gateway's --listen")
        return UnixHTTPConnection(path, timeout), ""
    u = urllib.parse.urlsplit(url)
    if u.scheme != "http" or not u.hostname:
        sys.exit(f"--url {url}: want http://HOST:PORT (loopback) or unix:PATH (the gateway's --listen)")
    return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout), u.path.rstrip("/")


def load_template(path):
    with open(path) as f:
        t = json.load(f)
    if not isinstance(t, list) or not all(isinstance(v, (int, float)) for v in t):
        sys.exit(f"{path}: want one JSON array of numbers")
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8480",
                    help="the gateway: http://HOST:PORT, or unix:PATH for its Unix socket")
    ap.add_argument("--timeout", type=float, default=30)
    ap.add_argument("--token-file", default=os.environ.get("IDFACE_GATEWAY_TOKEN_FILE"),
                    help="the gateway's bearer token file (default: $IDFACE_GATEWAY_TOKEN_FILE)")
    sub = ap.add_subparsers(dest="op", required=True)
    sub.add_parser("health")
    sub.add_parser("count")
    p = sub.add_parser("ids", help="the enrolled ids (an operator's gateway), a page at a time")
    p.add_argument("--after", default="", help="the page after this id (the last answer's \"after\")")
    p.add_argument("--limit", type=int, help="at most this many ids (1..10000; the gateway's default 1000)")
    p.add_argument("--all", action="store_true", help="every page, printed as one answer")
    p = sub.add_parser("exists", help="whether one id is enrolled (an operator's gateway)")
    p.add_argument("--id", required=True)
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
    method, body, query = "POST", None, {}
    if a.op in ("health", "count", "ids", "exists"):
        method = "GET"
        if a.op == "exists":
            query = {"id": a.id}
        elif a.op == "ids":
            if a.after:
                query["after"] = a.after
            if a.limit is not None:
                query["limit"] = str(a.limit)
    elif a.op == "identify":
        body = {"template": load_template(a.template)}
    elif a.op == "enroll":
        body = {"id": a.id, "template": load_template(a.template)}
    else:
        body = {"id": a.id}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"  # the gateway takes no other

    def ask(query):
        """One request: the status and the JSON answer, or None when the
        gateway cannot be reached or did not answer JSON (said on stderr)."""
        path = f"{prefix}/v1/{a.op}"
        if query:
            path += "?" + urllib.parse.urlencode(query)
        conn = connection(a.url, a.timeout)[0]
        try:
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            raw = r.read()
        except OSError as e:
            print(f"cannot reach the gateway at {a.url}: {e} (is 'idface gateway' running there?)", file=sys.stderr)
            return None
        finally:
            conn.close()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            print(f"the gateway at {a.url} answered {r.status} with something other than JSON: {raw[:200]!r}", file=sys.stderr)
            return None

    prefix = connection(a.url, a.timeout)[1]
    got = ask(query)
    if got is None:
        return 1
    status, answer = got
    # --all: the next pages, after the last id of each, into one answer.
    while a.op == "ids" and a.all and status == 200 and answer.get("more"):
        got = ask(dict(query, after=answer["after"]))
        if got is None:
            return 1
        status, page = got
        if status != 200:
            answer = page
            break
        answer = {"ids": answer["ids"] + page["ids"], "more": page["more"], **({"after": page["after"]} if page.get("more") else {})}
    print(json.dumps(answer, sort_keys=True))
    if status != 200:
        print(f"gateway refused ({status}): {answer.get('error', '')}", file=sys.stderr)
        return 1
    if a.op == "identify" and answer["decision"] == "accepted":
        print(f"open the gate for {answer['id']}" + (" (degraded answer)" if answer.get("degraded") else ""), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
