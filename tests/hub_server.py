"""hub_server.py ROOT PORTFILE LOG [--cut-once N] [--stall-once N]

A Hub-shaped HTTP server for the tests, on Python's http.server. ROOT/OWNER/NAME/FILE is served
at /datasets/OWNER/NAME/resolve/REV/FILE (REV: main, or the repo's commit) with the headers
huggingface_hub reads, the way huggingface.co answers:
  - every answer names the commit: X-Repo-Commit (the sha1 of "OWNER/NAME" here);
  - a file over 4096 bytes is an LFS file: 302 to http://HOST/cdn/SHA256 (an absolute URL, as
    to the CDN), X-Linked-Etag "SHA256" and X-Linked-Size;
  - a smaller one is answered directly: 200, ETag "git blob sha1", Content-Length;
  - an unknown repo: 401 (RepoNotFound); an unknown file: 404 (EntryNotFound).
/cdn/SHA256 serves the bytes and honours Range: bytes=N- (206), as the CDN does.
Each request is logged to LOG as "METHOD PATH range=R auth=A" (A: the Authorization header).
--cut-once N: the first /cdn GET sends N bytes of its full-length answer, then hangs up;
--stall-once N: the first /cdn GET sends N bytes, then waits until the server is stopped.
PORTFILE gets the port (any free one) once the server listens.
"""
import hashlib
import http.server
import os
import sys
import threading
import time

root, portfile, logpath = sys.argv[1], sys.argv[2], sys.argv[3]
opts = sys.argv[4:]
cut = int(opts[opts.index("--cut-once") + 1]) if "--cut-once" in opts else None
stall = int(opts[opts.index("--stall-once") + 1]) if "--stall-once" in opts else None
fault_used = threading.Lock()
log_lock = threading.Lock()


def commit_of(repo):
    return hashlib.sha1(repo.encode()).hexdigest()


def blobs():
    """sha256 -> path of every file under ROOT (the CDN's content-addressed store)."""
    out = {}
    for d, _, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            out[hashlib.sha256(open(p, "rb").read()).hexdigest()] = p
    return out


class Hub(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def log(self):
        with log_lock, open(logpath, "a") as f:
            f.write(f"{self.command} {self.path} range={self.headers.get('Range', '-')} "
                    f"auth={self.headers.get('Authorization', '-')}\n")

    def answer(self, status, headers, body=b""):
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        if "Content-Length" not in headers:
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self.log()
        parts = self.path.split("/")
        if len(parts) == 3 and parts[1] == "cdn":
            return self.cdn(parts[2])
        # /datasets/OWNER/NAME/resolve/REV/FILE
        if len(parts) != 7 or parts[1] != "datasets" or parts[4] != "resolve":
            return self.answer(404, {})
        repo, rev, name = parts[2] + "/" + parts[3], parts[5], parts[6]
        commit = commit_of(repo)
        if not os.path.isdir(os.path.join(root, repo)):
            return self.answer(401, {"X-Error-Code": "RepoNotFound"})
        path = os.path.join(root, repo, name)
        if rev not in ("main", commit):
            return self.answer(404, {"X-Error-Code": "RevisionNotFound"})
        if not os.path.isfile(path):
            return self.answer(404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit})
        data = open(path, "rb").read()
        if len(data) > 4096:
            sha = hashlib.sha256(data).hexdigest()
            host = self.headers.get("Host")
            return self.answer(302, {"X-Repo-Commit": commit, "X-Linked-Etag": f'"{sha}"',
                                     "X-Linked-Size": str(len(data)), "Location": f"http://{host}/cdn/{sha}",
                                     "ETag": '"pointer-etag"'})
        git = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        self.answer(200, {"X-Repo-Commit": commit, "ETag": f'"{git}"', "Content-Type": "text/csv"}, data)

    def cdn(self, sha):
        path = blobs().get(sha)
        if not path:
            return self.answer(404, {})
        data = open(path, "rb").read()
        start = 0
        rng = self.headers.get("Range")
        if rng and rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[6:-1])
            if start >= len(data):
                return self.answer(416, {"Content-Range": f"bytes */{len(data)}"})
        headers = {"Content-Length": str(len(data) - start), "Content-Type": "text/csv"}
        if start:
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        fault = None
        if self.command == "GET" and (cut is not None or stall is not None) and fault_used.acquire(blocking=False):
            fault = ("cut", cut) if cut is not None else ("stall", stall)
        if not fault:
            return self.answer(206 if start else 200, headers, data[start:])
        self.send_response(206 if start else 200)
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data[start:start + fault[1]])
        self.wfile.flush()
        if fault[0] == "stall":
            while True:
                time.sleep(1)
        self.close_connection = True


server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
server.daemon_threads = True
with open(portfile + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(portfile + ".tmp", portfile)
server.serve_forever()
